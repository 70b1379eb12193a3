"""A bag-of-words genre tagger for short plot summaries, written as a Lightning-style module
(training_step, configure_optimizers) driven by a small loop. The config copies the Hugging Face
convention of picking the loss from problem_type, and its default, single-label classification,
was left in place although a summary has one to three of eight genres: cross_entropy gets the
multi-hot genre vectors as float targets, so after 60 steps only about a fifth of the genres of
multi-genre summaries score above 0.5."""
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class TaggerConfig:
    vocab_size: int = 400
    num_genres: int = 8
    embed_dim: int = 32
    lr: float = 2e-2
    batch_size: int = 64
    problem_type: str = "single_label_classification"


class GenreTagger(nn.Module):
    def __init__(self, cfg: TaggerConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.EmbeddingBag(cfg.vocab_size, cfg.embed_dim, mode="mean")
        self.head = nn.Sequential(nn.Linear(cfg.embed_dim, 64), nn.ReLU(), nn.Linear(64, cfg.num_genres))

    def forward(self, tokens):
        return self.head(self.embed(tokens))

    def compute_loss(self, logits, labels):
        if self.cfg.problem_type == "multi_label_classification":
            return F.binary_cross_entropy_with_logits(logits, labels.float())
        return F.cross_entropy(logits, labels.float())

    def training_step(self, batch):
        tokens, labels = batch
        return self.compute_loss(self(tokens), labels)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.cfg.lr)


def make_corpus(cfg, n=1024, length=24, g=None):
    """Each summary has one to three genres; half its words come from its genres' vocabulary slices."""
    count = torch.randint(1, 4, (n, 1), generator=g)
    rank = torch.rand(n, cfg.num_genres, generator=g).argsort(1).argsort(1)
    labels = (rank < count).long()                                    # multi-hot, 1-3 ones per row
    per_genre = cfg.vocab_size // (2 * cfg.num_genres)
    slot = torch.multinomial(labels.float(), length // 2, replacement=True, generator=g)
    genre_words = slot * per_genre + torch.randint(0, per_genre, (n, length // 2), generator=g)
    filler = torch.randint(cfg.vocab_size // 2, cfg.vocab_size, (n, length - length // 2), generator=g)
    return torch.cat([genre_words, filler], 1), labels


def fit(module, tokens, labels, steps):
    optimizer = module.configure_optimizers()
    bs = module.cfg.batch_size
    for step in range(steps):
        i = (step * bs) % len(tokens)
        loss = module.training_step((tokens[i:i + bs], labels[i:i + bs]))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    cfg = TaggerConfig()
    tokens, labels = make_corpus(cfg, g=g)
    module = GenreTagger(cfg)
    loss = fit(module, tokens, labels, steps=60)
    with torch.no_grad():
        probs = module(tokens).softmax(-1) if cfg.problem_type != "multi_label_classification" \
            else module(tokens).sigmoid()
    several = labels.sum(1) > 1
    found = ((probs > 0.5) & (labels > 0))[several].sum() / labels[several].sum()
    print(f"final loss {loss:.3f}; genres found at 0.5 in summaries with several genres: {found:.0%}")


if __name__ == "__main__":
    main()
