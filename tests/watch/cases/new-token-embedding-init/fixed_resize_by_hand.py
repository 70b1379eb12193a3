"""The same tied LM and hand-written resize, with the four new rows set to the mean of the trained
rows before fine-tuning starts."""
import torch
from torch import nn


class TinyLM(nn.Module):
    def __init__(self, vocab, dim=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        nn.init.normal_(self.embed.weight, std=0.02)
        self.mix = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.embed.weight  # tied

    def forward(self, ids):
        h, _ = self.mix(self.embed(ids))
        return self.head(h)


def add_tokens(model, count):
    old = model.embed
    new = nn.Embedding(old.num_embeddings + count, old.embedding_dim)
    with torch.no_grad():
        new.weight[: old.num_embeddings] = old.weight
        new.weight[old.num_embeddings:] = old.weight.mean(0)
    model.embed = new
    model.head.weight = new.weight
    return model


def batches(vocab, steps, g):
    for _ in range(steps):
        start = torch.randint(0, vocab - 12, (16, 1), generator=g)
        yield (start + torch.arange(12)) % vocab  # counting sequences: each token predicts the next


def train(model, opt, data, vocab):
    for ids in data:
        logits = model(ids[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    vocab = 200
    model = TinyLM(vocab)
    train(model, torch.optim.AdamW(model.parameters(), lr=3e-3), batches(vocab, 30, g), vocab)
    model = add_tokens(model, 4)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    print(f"fine-tune loss {train(model, opt, batches(vocab, 60, g), vocab):.3f}")


if __name__ == "__main__":
    main()
