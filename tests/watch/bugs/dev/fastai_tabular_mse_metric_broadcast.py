"""A fastai-v1-style tabular regression: a TabularModel (one embedding per categorical column,
concatenated with the continuous columns, then a Linear-ReLU-BatchNorm MLP ending in one output)
trained by a small Learner with a fit(epochs) loop and a validate() pass that reports the
validation loss and a list of metrics. The loss function flattens the predictions before the MSE,
but the mean_squared_error metric compares the (bs, 1) predictions with the (bs,) targets as they
are, so they broadcast to a (bs, bs) grid: the reported validation MSE metric is far from the
validation loss and says nothing about how well the model fits.

Thread: https://github.com/fastai/fastai/issues/1486
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_table(n, seed):
    g = torch.Generator().manual_seed(seed)
    cats = torch.stack([torch.randint(0, 5, (n,), generator=g),
                        torch.randint(0, 8, (n,), generator=g)], dim=1)
    conts = torch.randn(n, 4, generator=g)
    cat_effect = torch.tensor([-1.0, 0.5, 0.0, 1.5, -0.5])[cats[:, 0]] + 0.2 * cats[:, 1].float()
    y = cat_effect + conts[:, 0] - 0.7 * conts[:, 1] * conts[:, 2] + 0.1 * torch.randn(n, generator=g)
    return TensorDataset(cats, conts, y)


class TabularModel(nn.Module):
    def __init__(self, emb_szs, n_cont, out_sz, layers):
        super().__init__()
        self.embeds = nn.ModuleList([nn.Embedding(ni, nf) for ni, nf in emb_szs])
        self.bn_cont = nn.BatchNorm1d(n_cont)
        sizes = [sum(nf for _, nf in emb_szs) + n_cont] + layers
        blocks = []
        for n_in, n_out in zip(sizes[:-1], sizes[1:]):
            blocks += [nn.Linear(n_in, n_out), nn.ReLU(inplace=True), nn.BatchNorm1d(n_out)]
        blocks.append(nn.Linear(sizes[-1], out_sz))
        self.layers = nn.Sequential(*blocks)

    def forward(self, x_cat, x_cont):
        x = torch.cat([e(x_cat[:, i]) for i, e in enumerate(self.embeds)], dim=1)
        x = torch.cat([x, self.bn_cont(x_cont)], dim=1)
        return self.layers(x)


def mse_flat(pred, targ):
    return F.mse_loss(pred.view(-1), targ.view(-1))


def mean_squared_error(pred, targ):
    return ((pred - targ) ** 2).mean()


class Learner:
    def __init__(self, train_dl, valid_dl, model, loss_func, metrics, lr):
        self.train_dl, self.valid_dl = train_dl, valid_dl
        self.model, self.loss_func, self.metrics = model, loss_func, metrics
        self.opt = torch.optim.Adam(model.parameters(), lr=lr)

    def fit(self, epochs):
        for epoch in range(epochs):
            self.model.train()
            for x_cat, x_cont, yb in self.train_dl:
                loss = self.loss_func(self.model(x_cat, x_cont), yb)
                loss.backward()
                self.opt.step()
                self.opt.zero_grad()
            val_loss, mets = self.validate()
            print(f"epoch {epoch}  train_loss {loss.item():.4f}  valid_loss {val_loss:.4f}  "
                  + "  ".join(f"{name} {v:.4f}" for name, v in mets.items()))

    def validate(self):
        self.model.eval()
        preds, targs = [], []
        with torch.no_grad():
            for x_cat, x_cont, yb in self.valid_dl:
                preds.append(self.model(x_cat, x_cont))
                targs.append(yb)
        pred, targ = torch.cat(preds), torch.cat(targs)
        return self.loss_func(pred, targ).item(), {m.__name__: m(pred, targ).item() for m in self.metrics}


def main():
    torch.manual_seed(0)
    train_dl = DataLoader(make_table(2000, seed=1), batch_size=64, shuffle=True,
                          generator=torch.Generator().manual_seed(0))
    valid_dl = DataLoader(make_table(500, seed=2), batch_size=128)
    model = TabularModel(emb_szs=[(5, 3), (8, 4)], n_cont=4, out_sz=1, layers=[200, 100])
    learn = Learner(train_dl, valid_dl, model, loss_func=mse_flat,
                    metrics=[mean_squared_error], lr=1e-3)
    learn.fit(4)


if __name__ == "__main__":
    main()
