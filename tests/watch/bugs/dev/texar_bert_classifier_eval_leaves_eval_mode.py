"""Fine-tuning a BERT-style sentence classifier in the shape of a library's BERT classifier example:
main() builds the classifier, an Adam optimizer with decay / no-decay parameter groups, a LambdaLR
with linear warmup and decay, and a data iterator over train / eval sets switched by name; nested
helpers _compute_loss, _train_epoch and _eval_epoch (under no_grad) do the work, and _train_epoch
calls _eval_epoch every config eval_steps optimizer steps. _eval_epoch switches the model to eval()
and nothing switches it back: from the first periodic evaluation to the end of training the
classifier trains with its dropout turned off.

Thread: https://github.com/asyml/texar-pytorch/pull/311
"""
import functools

import torch
import torch.nn.functional as F
from torch import nn

config_data = {"num_train_data": 800, "train_batch_size": 32, "max_train_epoch": 4, "display_steps": 10,
               "eval_steps": 20, "warmup_proportion": 0.1, "eval_batch_size": 64, "max_seq_length": 20}
VOCAB, DIM = 50, 64


class BERTClassifier(nn.Module):
    def __init__(self, num_classes=2, hidden_dropout=0.1):
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB, DIM, padding_idx=0)
        self.position_embeddings = nn.Embedding(64, DIM)
        self.segment_embeddings = nn.Embedding(2, DIM)
        layer = nn.TransformerEncoderLayer(DIM, 4, 4 * DIM, dropout=hidden_dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.layer_norm = nn.LayerNorm(DIM)
        self.pooler = nn.Linear(DIM, DIM)
        self.dropout = nn.Dropout(hidden_dropout)
        self.logits_layer = nn.Linear(DIM, num_classes)
        self.num_classes, self.is_binary = num_classes, False

    def forward(self, input_ids, input_length, segment_ids):
        pos = torch.arange(input_ids.size(1)).unsqueeze(0)
        h = self.word_embeddings(input_ids) + self.position_embeddings(pos) + self.segment_embeddings(segment_ids)
        pad = pos >= input_length.unsqueeze(1)
        h = self.encoder(self.layer_norm(h), src_key_padding_mask=pad)
        pooled = torch.tanh(self.pooler(h[:, 0]))
        logits = self.logits_layer(self.dropout(pooled))
        return logits, logits.argmax(-1)


class DataIterator:
    def __init__(self, datasets, batch_sizes):
        self.datasets, self.batch_sizes, self.current = datasets, batch_sizes, None
        self.g = torch.Generator().manual_seed(1)

    def switch_to_dataset(self, name):
        self.current = name

    def __iter__(self):
        data, bs = self.datasets[self.current], self.batch_sizes[self.current]
        n = len(data["label_ids"])
        order = torch.randperm(n, generator=self.g) if self.current == "train" else torch.arange(n)
        for i in range(0, n - (bs - 1 if self.current == "train" else 0), bs):
            idx = order[i:i + bs]
            yield {k: v[idx] for k, v in data.items()}


def make_pair_data(n, g, noise=0.1):
    """Sentence-pair task: label 1 when the pair holds at least three "keyword" tokens (ids 3-9); noisy labels."""
    L = config_data["max_seq_length"] // 2
    a = torch.randint(3, VOCAB, (n, L - 2), generator=g)
    b = torch.randint(3, VOCAB, (n, L - 1), generator=g)
    input_ids = torch.cat([torch.full((n, 1), 1), a, torch.full((n, 1), 2), b, torch.full((n, 1), 2)], 1)
    segment_ids = torch.cat([torch.zeros(n, L, dtype=torch.long), torch.ones(n, L, dtype=torch.long)], 1)
    labels = ((input_ids >= 3) & (input_ids <= 9)).sum(1).ge(3).long()
    flip = torch.rand(n, generator=g) < noise
    labels[flip] = 1 - labels[flip]
    return {"input_ids": input_ids, "segment_ids": segment_ids, "label_ids": labels}


def get_lr_multiplier(step, total_steps, warmup_steps):
    if step < warmup_steps:
        return step / max(1, warmup_steps)
    return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = BERTClassifier(num_classes=2)
    num_train_steps = int(config_data["num_train_data"] / config_data["train_batch_size"]
                          * config_data["max_train_epoch"])
    num_warmup_steps = int(num_train_steps * config_data["warmup_proportion"])

    vars_with_decay, vars_without_decay = [], []
    for name, param in model.named_parameters():
        (vars_without_decay if "layer_norm" in name or "norm" in name or name.endswith("bias")
         else vars_with_decay).append(param)
    optim = torch.optim.Adam([{"params": vars_with_decay, "weight_decay": 0.01},
                              {"params": vars_without_decay, "weight_decay": 0.0}], lr=1e-3, eps=1e-6)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optim, functools.partial(
        get_lr_multiplier, total_steps=num_train_steps, warmup_steps=num_warmup_steps))

    iterator = DataIterator({"train": make_pair_data(config_data["num_train_data"], g),
                             "eval": make_pair_data(512, g, noise=0.0)},
                            {"train": config_data["train_batch_size"], "eval": config_data["eval_batch_size"]})

    def _compute_loss(logits, labels):
        return F.cross_entropy(logits.view(-1, model.num_classes), labels.view(-1), reduction="mean")

    def _train_epoch():
        iterator.switch_to_dataset("train")
        model.train()
        for batch in iterator:
            optim.zero_grad()
            input_ids, segment_ids, labels = batch["input_ids"], batch["segment_ids"], batch["label_ids"]
            input_length = (1 - (input_ids == 0).int()).sum(dim=1)
            logits, _ = model(input_ids, input_length, segment_ids)
            loss = _compute_loss(logits, labels)
            loss.backward()
            optim.step()
            scheduler.step()
            step = scheduler.last_epoch
            if config_data["display_steps"] > 0 and step % config_data["display_steps"] == 0:
                print(f"step: {step}; loss: {loss.item():.4f}")
            if config_data["eval_steps"] > 0 and step % config_data["eval_steps"] == 0:
                _eval_epoch()

    @torch.no_grad()
    def _eval_epoch():
        iterator.switch_to_dataset("eval")
        model.eval()
        correct = total = 0
        for batch in iterator:
            input_length = (1 - (batch["input_ids"] == 0).int()).sum(dim=1)
            _, preds = model(batch["input_ids"], input_length, batch["segment_ids"])
            correct += int((preds == batch["label_ids"]).sum())
            total += len(preds)
        print(f"eval accu: {correct / total:.4f}; nsamples: {total}")

    for _ in range(config_data["max_train_epoch"]):
        _train_epoch()


if __name__ == "__main__":
    main()
