"""Language-model training with a GPT-2 LM head model in the style of the early
pytorch-pretrained-BERT port: GPT2LMHeadModel wraps a causal GPT2Model and an lm_head tied to the
token embedding; forward(input_ids, position_ids=None, token_type_ids=None, lm_labels=None) returns
the loss when lm_labels is given, computed as CrossEntropyLoss(ignore_index=-1) between
lm_logits.view(-1, V) and lm_labels.view(-1). The documented usage is lm_labels = input_ids, and the
training loop does exactly that (an OpenAIAdam-style optimizer: Adam with linear warmup and decay,
weight decay 0.01, clipping at 1.0). The head never shifts logits against labels, so position i is
scored on token i, which it can already see: the loss collapses towards zero by copying, while the
model's actual next-token predictions are worse than a uniform guess.

Thread: https://github.com/huggingface/transformers/pull/404
"""
import math

import torch
from torch import nn
from torch.nn import CrossEntropyLoss
from torch.utils.data import DataLoader, TensorDataset

VOCAB, N_CTX = 48, 32


class GPT2Config:
    vocab_size = VOCAB
    n_positions = 64
    n_embd = 64
    n_layer = 2
    n_head = 4


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = nn.MultiheadAttention(config.n_embd, config.n_head, batch_first=True)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = nn.Sequential(nn.Linear(config.n_embd, 4 * config.n_embd), nn.GELU(),
                                 nn.Linear(4 * config.n_embd, config.n_embd))

    def forward(self, x, bias):
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, attn_mask=bias, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class GPT2Model(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.n_positions, config.n_embd)
        self.h = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd)
        nn.init.normal_(self.wte.weight, std=0.02)
        nn.init.normal_(self.wpe.weight, std=0.01)

    def forward(self, input_ids, position_ids=None):
        t = input_ids.size(-1)
        if position_ids is None:
            position_ids = torch.arange(t).unsqueeze(0).expand_as(input_ids)
        hidden = self.wte(input_ids) + self.wpe(position_ids)
        bias = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        for block in self.h:
            hidden = block(hidden, bias)
        return self.ln_f(hidden)


class GPT2LMHead(nn.Module):
    def __init__(self, model_embeddings_weights):
        super().__init__()
        self.decoder = nn.Linear(model_embeddings_weights.size(1), model_embeddings_weights.size(0), bias=False)
        self.decoder.weight = model_embeddings_weights

    def forward(self, hidden_state):
        return self.decoder(hidden_state)


class GPT2LMHeadModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.transformer = GPT2Model(config)
        self.lm_head = GPT2LMHead(self.transformer.wte.weight)

    def forward(self, input_ids, position_ids=None, token_type_ids=None, lm_labels=None):
        hidden_states = self.transformer(input_ids, position_ids)
        lm_logits = self.lm_head(hidden_states)
        if lm_labels is not None:
            loss_fct = CrossEntropyLoss(ignore_index=-1)
            loss = loss_fct(lm_logits.view(-1, lm_logits.size(-1)), lm_labels.view(-1))
            return loss
        return lm_logits


def make_corpus(n_seq, seed):
    """Sequences where each token is a fixed function of the previous one, with 25% random tokens."""
    g = torch.Generator().manual_seed(seed)
    succ = torch.randperm(VOCAB, generator=torch.Generator().manual_seed(3))
    rows = []
    for _ in range(n_seq):
        row = [int(torch.randint(VOCAB, (1,), generator=g))]
        for _ in range(N_CTX - 1):
            row.append(int(torch.randint(VOCAB, (1,), generator=g)) if torch.rand(1, generator=g) < 0.25
                       else int(succ[row[-1]]))
        rows.append(row)
    return torch.tensor(rows)


def warmup_linear(x, warmup=0.1):
    return x / warmup if x < warmup else max(0.0, 1.0 - x)


def main():
    torch.manual_seed(42)
    model = GPT2LMHeadModel(GPT2Config())
    train_dataloader = DataLoader(TensorDataset(make_corpus(1280, seed=0)), batch_size=16, shuffle=True,
                                  generator=torch.Generator().manual_seed(0))
    num_train_epochs = 2
    t_total = num_train_epochs * len(train_dataloader)
    param_optimizer = list(model.named_parameters())
    no_decay = ["bias", "ln_"]
    optimizer_grouped_parameters = [
        {"params": [p for n, p in param_optimizer if not any(nd in n for nd in no_decay)], "weight_decay": 0.01},
        {"params": [p for n, p in param_optimizer if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=1.5e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: warmup_linear(s / t_total))
    model.train()
    nb_tr_steps, tr_loss = 0, 0.0
    for _ in range(num_train_epochs):
        for step, (input_ids,) in enumerate(train_dataloader):
            loss = model(input_ids, lm_labels=input_ids)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            tr_loss += loss.item()
            nb_tr_steps += 1
            if nb_tr_steps % 20 == 0:
                print(f"step {nb_tr_steps} loss {tr_loss / 20:.4f} lr {scheduler.get_last_lr()[0]:.2e}")
                tr_loss = 0.0
    model.eval()
    test = make_corpus(64, seed=1)
    with torch.no_grad():
        logits = model(test)[:, :-1]
    nll = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), test[:, 1:].reshape(-1)).item()
    print(f"held-out next-token loss {nll:.3f} (uniform guess {math.log(VOCAB):.3f})")


if __name__ == "__main__":
    main()
