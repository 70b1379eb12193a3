"""A Bernoulli autoencoder on grey-level images binarises its input in forward() by sampling each
pixel with its own intensity as probability (dynamic binarisation), in training and evaluation
alike. Those draws have a different probability per pixel: sampling data, not a dropout mask."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class BernoulliAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 8))
        self.dec = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 64))

    def forward(self, x):
        x = torch.bernoulli(x)
        return self.dec(self.enc(x)), x


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    images = torch.sigmoid(torch.randn(1200, 64, generator=g) * 2)
    train = DataLoader(TensorDataset(images[:1000]), batch_size=50, shuffle=True, generator=g)
    val = DataLoader(TensorDataset(images[1000:]), batch_size=100)
    model = BernoulliAE()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    for epoch in range(3):
        model.train()
        for (x,) in train:
            logits, target = model(x)
            loss = F.binary_cross_entropy_with_logits(logits, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            val_loss = sum(F.binary_cross_entropy_with_logits(*model(x)).item() for (x,) in val)
        print(f"epoch {epoch} val {val_loss:.3f}")


if __name__ == "__main__":
    main()
