"""A pretraining script with no evaluation of its own: an autoencoder whose encoder applies
F.dropout(h, p=0.3, training=self.training) is trained over a DataLoader and its weights are kept for
a downstream job that calls encoder.eval(), where the dropout is then off."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(32, 64), nn.Linear(64, 8)

    def forward(self, x):
        h = F.dropout(F.relu(self.fc1(x)), p=0.3, training=self.training)
        return self.fc2(h)


class AutoEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.decoder = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 32))

    def forward(self, x):
        return self.decoder(self.encoder(x))


def pretrain(model, loader, epochs=4):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(epochs):
        total = 0.0
        for (x,) in loader:
            loss = F.mse_loss(model(x), x)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
        print(f"epoch {epoch} reconstruction {total / len(loader):.4f}")
    return {k: v.clone() for k, v in model.encoder.state_dict().items()}


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    basis = torch.randn(8, 32, generator=g)
    x = torch.randn(1280, 8, generator=g) @ basis + 0.1 * torch.randn(1280, 32, generator=g)
    loader = DataLoader(TensorDataset(x), batch_size=32, shuffle=True, generator=g)
    weights = pretrain(AutoEncoder(), loader)
    print(f"kept {len(weights)} encoder tensors for the downstream job")


if __name__ == "__main__":
    main()
