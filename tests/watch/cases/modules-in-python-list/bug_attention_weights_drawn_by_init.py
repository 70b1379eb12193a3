"""A sequence regressor encodes each time step on its own and pools the per-step features with a
learned attention over the time steps; the attention scores are a plain tensor created in __init__
with torch.empty and filled by nn.init.normal_, not an nn.Parameter. A train(model, loader, optimizer) helper runs the loop; the
optimizer, built from model.parameters(), never sees the scores, they get no gradient, and the
pooling stays at its random draw for the whole run (the target needs the last step only: the loss
stays near 1.5 where the trained pooling reaches about 0.3)."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class AttentionPoolRegressor(nn.Module):
    def __init__(self, features=8, hidden=32, steps=12):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(features, hidden), nn.Tanh())   # each step on its own
        self.scores = torch.empty(steps)
        nn.init.normal_(self.scores, std=0.5)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        states = self.encoder(x)                         # (B, T, H)
        weights = torch.softmax(self.scores, dim=0)      # (T,)
        pooled = (states * weights[None, :, None]).sum(1)
        return self.head(pooled).squeeze(-1)


def train(model, loader, optimizer, epochs):
    loss_fn = nn.MSELoss()
    for epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(640, 12, 8, generator=g)
    y = x[:, -1, :2].sum(1)                              # only the last step matters
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g)
    model = AttentionPoolRegressor()
    train(model, loader, torch.optim.Adam(model.parameters(), lr=1e-2), epochs=6)


if __name__ == "__main__":
    main()
