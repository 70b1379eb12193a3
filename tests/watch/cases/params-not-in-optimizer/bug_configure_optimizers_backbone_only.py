"""Lightning-like hooks called by a small hand-written loop: configure_optimizers() returns an
optimizer over self.backbone.parameters() only (copied from a linear-probe recipe, the other way
round), so the classifier head gets gradients at every step and never changes."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class LitClassifier(nn.Module):
    def __init__(self, features=20, hidden=64, classes=4, lr=1e-3):
        super().__init__()
        self.lr = lr
        self.backbone = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.classifier = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.classifier(self.backbone(x))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self(x), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.backbone.parameters(), lr=self.lr)


def fit(module, loader, epochs):
    optimizer = module.configure_optimizers()
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
    x = torch.randn(512, 20, generator=g)
    y = (x[:, :4] @ torch.randn(4, 4, generator=g)).argmax(1)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g)
    print(f"loss {fit(LitClassifier(), loader, epochs=4):.3f}")


if __name__ == "__main__":
    main()
