"""Uncertainty estimates from a reloaded checkpoint: a fresh regressor is built, its weights are
loaded with load_state_dict, model.eval() is called and then each Dropout layer is switched back
on with m.train() on purpose; predictive mean and spread come from 20 stochastic passes over each
batch under torch.no_grad(). A second helper builds a copy whose dropout layers are rebuilt as an
always-on MC dropout subclass after eval(). Dropout in training mode here is deliberate."""
import copy

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class AlwaysOnDropout(nn.Dropout):
    def forward(self, x):
        return F.dropout(x, self.p, True, self.inplace)


def build():
    return nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 64), nn.ReLU(),
                         nn.Dropout(0.2), nn.Linear(64, 1))


def enable_dropout(model):
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.train()
    return model


def with_mc_layers(model):
    model = copy.deepcopy(model)
    for name, m in list(model.named_modules()):
        if type(m) is nn.Dropout:
            parent, _, attr = name.rpartition(".")
            setattr(model.get_submodule(parent), attr, AlwaysOnDropout(m.p))
    return model


def predict_with_uncertainty(model, loader, samples=20):
    means, spreads = [], []
    with torch.no_grad():
        for (x,) in loader:
            draws = torch.stack([model(x) for _ in range(samples)])
            means.append(draws.mean(0))
            spreads.append(draws.std(0))
    return torch.cat(means), torch.cat(spreads)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 8, generator=g)
    y = x[:, :2].sum(1, keepdim=True) + 0.1 * torch.randn(512, 1, generator=g)
    model = build()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(1))
    model.train()
    for _ in range(2):
        for xb, yb in loader:
            optimizer.zero_grad()
            F.mse_loss(model(xb), yb).backward()
            optimizer.step()
    state = {k: v.clone() for k, v in model.state_dict().items()}

    reloaded = build()
    reloaded.load_state_dict(state)
    reloaded.eval()
    enable_dropout(reloaded)
    test = DataLoader(TensorDataset(torch.randn(128, 8, generator=g)), batch_size=64)
    _, spread = predict_with_uncertainty(reloaded, test)
    _, mc_spread = predict_with_uncertainty(with_mc_layers(reloaded.eval()), test)
    print(f"mean predictive std {spread.mean():.3f}, with MC layers {mc_spread.mean():.3f}")


if __name__ == "__main__":
    main()
