"""The fixed twin: the same Lightning-style rating model with five outputs and log_softmax +
nll_loss, but make_dataset() shifts the 1-based star ratings to classes 0..4 (stars - 1), so every
target is a valid index into the five outputs and the model trains."""
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

HPARAMS = {"num_features": 8, "hidden": 32, "num_classes": 5, "lr": 0.05, "batch_size": 64, "epochs": 3}


def make_reviews(n, g):
    stars = torch.randint(1, 6, (n,), generator=g)                  # ratings as stored: 1..5
    x = torch.randn(n, HPARAMS["num_features"], generator=g)
    x[:, 0] += stars.float() - 3.0                                     # overall sentiment score
    x[:, 1] += (stars == 5).float() - (stars == 1).float()             # "exclamation" feature
    return x, stars


def make_dataset(x, stars):
    return TensorDataset(x, stars - 1)                                 # classes 0..4 for the 5 outputs


class RatingModule(nn.Module):
    def __init__(self, hparams):
        super().__init__()
        self.hparams = hparams
        self.net = nn.Sequential(nn.Linear(hparams["num_features"], hparams["hidden"]), nn.ReLU(),
                                 nn.Linear(hparams["hidden"], hparams["num_classes"]))

    def forward(self, x):
        return F.log_softmax(self.net(x), dim=1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.nll_loss(self(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams["lr"], momentum=0.9)


def fit(module, loader, epochs):
    optimizer = module.configure_optimizers()
    module.train()
    for epoch in range(epochs):
        for batch_idx, batch in enumerate(loader):
            loss = module.training_step(batch, batch_idx)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x, stars = make_reviews(960, g)
    loader = DataLoader(make_dataset(x, stars), batch_size=HPARAMS["batch_size"], shuffle=True, generator=g)
    module = RatingModule(HPARAMS)
    loss = fit(module, loader, HPARAMS["epochs"])
    print(f"loss {loss:.3f}")


if __name__ == "__main__":
    main()
