"""A run_swag-style fine-tuning script for a BERT multiple-choice model: input_ids [B, choices, T]
are flattened, the encoder's pooled [CLS] output goes through dropout and a one-unit classifier,
and the logits are reshaped to [B, choices]. The optimizer groups are built from
model.named_parameters() after a filter that drops every name containing 'pooler' (meant for a
pooler that is unused), but the multiple-choice head does use the pooled output, so the pooler
gets gradients and is never updated. Decay / no-decay groups, linear warmup set by hand per step.

Thread: https://github.com/huggingface/transformers/issues/461
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, RandomSampler, TensorDataset

VOCAB, HIDDEN, SEQ, CHOICES = 50, 32, 8, 4


class BertPooler(nn.Module):
    def __init__(self):
        super().__init__()
        self.dense = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, hidden_states):
        return torch.tanh(self.dense(hidden_states[:, 0]))


class BertModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embeddings = nn.Embedding(VOCAB, HIDDEN)
        self.encoder = nn.TransformerEncoderLayer(HIDDEN, 4, 64, dropout=0.1, batch_first=True)
        self.pooler = BertPooler()

    def forward(self, input_ids):
        seq = self.encoder(self.embeddings(input_ids))
        return seq, self.pooler(seq)


class BertForMultipleChoice(nn.Module):
    def __init__(self, num_choices=CHOICES):
        super().__init__()
        self.num_choices = num_choices
        self.bert = BertModel()
        self.dropout = nn.Dropout(0.1)
        self.classifier = nn.Linear(HIDDEN, 1)

    def forward(self, input_ids, labels=None):
        _, pooled_output = self.bert(input_ids.view(-1, input_ids.size(-1)))
        logits = self.classifier(self.dropout(pooled_output)).view(-1, self.num_choices)
        return F.cross_entropy(logits, labels) if labels is not None else logits


def warmup_linear(x, warmup=0.1):
    return x / warmup if x < warmup else 1.0 - x


def swag_like_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, VOCAB, (n, CHOICES, SEQ), generator=g)
    ids[:, :, 0] = 1  # [CLS]
    labels = torch.randint(0, CHOICES, (n,), generator=g)
    ids[torch.arange(n), labels, 1 + torch.randint(0, SEQ - 1, (n,), generator=g)] = 0  # the cue token
    return TensorDataset(ids, labels)


def main():
    torch.manual_seed(42)
    learning_rate, num_train_epochs, batch_size, warmup_proportion = 5e-4, 4, 16, 0.1
    train_data = swag_like_data(320, seed=0)
    train_dataloader = DataLoader(train_data, sampler=RandomSampler(train_data), batch_size=batch_size)
    t_total = len(train_dataloader) * num_train_epochs
    model = BertForMultipleChoice()

    param_optimizer = list(model.named_parameters())
    param_optimizer = [n for n in param_optimizer if 'pooler' not in n[0]]
    no_decay = ['bias', 'norm1.weight', 'norm2.weight']
    optimizer_grouped_parameters = [
        {'params': [p for n, p in param_optimizer if not any(nd in n for nd in no_decay)], 'weight_decay': 0.01},
        {'params': [p for n, p in param_optimizer if any(nd in n for nd in no_decay)], 'weight_decay': 0.0}]
    optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=learning_rate)

    global_step = 0
    model.train()
    for epoch in range(num_train_epochs):
        tr_loss, nb_tr_steps = 0.0, 0
        for step, (input_ids, label_ids) in enumerate(train_dataloader):
            loss = model(input_ids, label_ids)
            tr_loss += loss.item()
            nb_tr_steps += 1
            loss.backward()
            lr_this_step = learning_rate * warmup_linear(global_step / t_total, warmup_proportion)
            for param_group in optimizer.param_groups:
                param_group['lr'] = lr_this_step
            optimizer.step()
            optimizer.zero_grad()
            global_step += 1
        print(f"epoch {epoch} loss {tr_loss / nb_tr_steps:.4f} "
              f"pooler grad set: {model.bert.pooler.dense.weight.grad is not None}")


if __name__ == "__main__":
    main()
