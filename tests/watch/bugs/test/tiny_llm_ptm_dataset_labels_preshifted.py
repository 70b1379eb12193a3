"""A small pretraining setup for a tiny Chinese LLM: a memory-mapped PTMDatasetMap cuts the token
stream into fixed-length windows and returns {"input_ids": window[:-1], "labels": window[1:]}; the
Hugging Face-style TinyLLMForCausalLM computes its own loss and shifts inside forward
(logits[:, :-1] against labels[:, 1:]); a small Trainer class runs AdamW with a warmup schedule.
The labels are shifted twice, so every position is trained to predict the token two steps ahead:
the loss settles at the floor of that harder task and next-token prediction is never learned.

Thread: https://github.com/wdndev/tiny-llm-zh/issues/10
"""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

VOCAB, SEQ = 48, 33


def token_stream(n_tokens, seed):
    """A stream where each token is a fixed function of the previous one, with 20% random restarts."""
    g = torch.Generator().manual_seed(seed)
    succ = torch.randperm(VOCAB, generator=torch.Generator().manual_seed(7))
    out = [int(torch.randint(VOCAB, (1,), generator=g))]
    for _ in range(n_tokens - 1):
        if torch.rand(1, generator=g) < 0.2:
            out.append(int(torch.randint(VOCAB, (1,), generator=g)))
        else:
            out.append(int(succ[out[-1]]))
    return torch.tensor(out)


class PTMDatasetMap(Dataset):
    def __init__(self, stream, max_length):
        n = len(stream) // max_length
        self.data = stream[: n * max_length].view(n, max_length)
        self.order = torch.randperm(n, generator=torch.Generator().manual_seed(3)).tolist()

    def __len__(self):
        return self.data.size(0)

    def __getitem__(self, index):
        sample = self.data[self.order[index]]
        return {"input_ids": sample[:-1].clone(), "labels": sample[1:].clone()}


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class TinyLLMForCausalLM(nn.Module):
    def __init__(self, vocab=VOCAB, dim=64, layers=2, heads=4, max_len=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_len, dim)
        self.layers = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, input_ids, labels=None):
        t = input_ids.size(1)
        x = self.embed(input_ids) + self.pos(torch.arange(t))
        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        for layer in self.layers:
            x = layer(x, mask)
        logits = self.lm_head(self.norm(x))
        loss = None
        if labels is not None:
            shift_logits = logits[:, :-1].contiguous()
            shift_labels = labels[:, 1:].contiguous()
            loss = F.cross_entropy(shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1),
                                   ignore_index=-100)
        return {"loss": loss, "logits": logits}


class Trainer:
    def __init__(self, model, train_dataset, batch_size, lr, warmup_steps, epochs):
        self.model = model
        self.loader = DataLoader(train_dataset, batch_size=batch_size, shuffle=True,
                                 generator=torch.Generator().manual_seed(0))
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
        total = epochs * len(self.loader)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min(1.0, (s + 1) / warmup_steps) * 0.5 * (1 + math.cos(math.pi * s / total)))
        self.epochs = epochs

    def train(self):
        step = 0
        for epoch in range(self.epochs):
            self.model.train()
            for batch in self.loader:
                loss = self.model(**batch)["loss"]
                loss.backward()
                nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.optimizer.step()
                self.scheduler.step()
                self.optimizer.zero_grad()
                step += 1
                if step % 20 == 0:
                    print(f"epoch {epoch} step {step} loss {loss.item():.4f}")


def main():
    torch.manual_seed(0)
    train_dataset = PTMDatasetMap(token_stream(36000, seed=0), max_length=SEQ)
    model = TinyLLMForCausalLM()
    Trainer(model, train_dataset, batch_size=32, lr=3e-3, warmup_steps=10, epochs=3).train()


if __name__ == "__main__":
    main()
