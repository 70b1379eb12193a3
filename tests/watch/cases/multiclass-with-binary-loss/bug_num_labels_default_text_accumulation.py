"""A bag-of-words text classifier for three sentiment classes (0 negative, 1 neutral, 2 positive),
trained with gradient accumulation from a config dataclass copied from a binary sentiment project.
The config's num_labels still defaults to 1, so the model gets one output unit and compute_loss()
takes its binary branch: binary_cross_entropy_with_logits on the labels 0..2 as float targets. For
target 2 that loss falls without bound as the logit grows: after 40 steps it is -2.7 and falling,
while the one unit's accuracy stays at 0.38 (chance is 0.33)."""
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass
class TrainConfig:
    vocab_size: int = 200
    embed_dim: int = 32
    num_labels: int = 1
    lr: float = 2e-2
    batch_size: int = 16
    accumulation_steps: int = 2
    optimizer_steps: int = 40


class BagOfWords(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed = nn.EmbeddingBag(cfg.vocab_size, cfg.embed_dim, mode="mean")
        self.classifier = nn.Linear(cfg.embed_dim, cfg.num_labels)

    def forward(self, tokens):
        return self.classifier(self.embed(tokens))


def compute_loss(logits, labels, num_labels):
    if num_labels == 1:   # binary head: one logit per review
        return F.binary_cross_entropy_with_logits(logits.squeeze(1), labels.float())
    return F.cross_entropy(logits, labels)


def predict(logits, num_labels):
    if num_labels == 1:
        return (logits.squeeze(1) > 0).long()
    return logits.argmax(1)


def make_reviews(n, length, cfg, g):
    labels = torch.randint(0, 3, (n,), generator=g)
    tokens = torch.randint(30, cfg.vocab_size, (n, length), generator=g)  # filler words
    cue = torch.randint(0, 10, (n, 3), generator=g) + 10 * labels[:, None]  # words 0-9 neg, 10-19 neutral, 20-29 pos
    tokens[:, :3] = cue
    return tokens, labels


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    cfg = TrainConfig()
    tokens, labels = make_reviews(2048, 12, cfg, g)
    model = BagOfWords(cfg)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    micro_batches = cfg.optimizer_steps * cfg.accumulation_steps
    optimizer.zero_grad()
    for i in range(micro_batches):
        idx = torch.randint(0, 2048, (cfg.batch_size,), generator=g)
        loss = compute_loss(model(tokens[idx]), labels[idx], cfg.num_labels) / cfg.accumulation_steps
        loss.backward()
        if (i + 1) % cfg.accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
    with torch.no_grad():
        logits = model(tokens)
        loss = compute_loss(logits, labels, cfg.num_labels).item()
        accuracy = (predict(logits, cfg.num_labels) == labels).float().mean().item()
    print(f"loss {loss:.3f}, accuracy {accuracy:.2f}")


if __name__ == "__main__":
    main()
