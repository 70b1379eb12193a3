"""Lightning-like hooks called by a small hand-written loop: training_step() feeds F.softmax of
the logits to F.nll_loss, which expects log-probabilities; the loss is trapped in [-1, 0] and
its gradient vanishes as the model grows confident."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class LitConvNet(nn.Module):
    def __init__(self, classes=5):
        super().__init__()
        self.features = nn.Sequential(nn.Conv1d(1, 8, 5, padding=2), nn.ReLU(), nn.AdaptiveAvgPool1d(8))
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        return self.fc(self.features(x.unsqueeze(1)).flatten(1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        probs = F.softmax(self(x), dim=1)
        return F.nll_loss(probs, y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)


def fit(module, loader, epochs):
    optimizer = module.configure_optimizers()
    for epoch in range(epochs):
        for batch_idx, batch in enumerate(loader):
            optimizer.zero_grad()
            loss = module.training_step(batch, batch_idx)
            loss.backward()
            optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 5, (400,), generator=g)
    t = torch.linspace(0, 6.2832, 32)
    x = torch.sin(t[None, :] * (y[:, None] + 1)) + 0.3 * torch.randn(400, 32, generator=g)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g)
    print(f"loss {fit(LitConvNet(), loader, epochs=5):.3f}")


if __name__ == "__main__":
    main()
