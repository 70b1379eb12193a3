"""A regression on tabular rows with a recurrent layer in the middle, as some forecasting scripts
write it: each sample is one row of lagged features (batch, features); the model adds a length-one
sequence axis in front, `x.unsqueeze(0)`, for an nn.GRU that keeps batch_first=False, so the GRU
reads (1, batch, features) as one step of `batch` independent samples.
The loop is a plain function over a model and optimizer passed in, with MSE and Adam."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES = 8


class LagRegressor(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.inp = nn.Linear(FEATURES, hidden)
        self.gru = nn.GRU(hidden, hidden)
        self.out = nn.Linear(hidden, 1)

    def forward(self, x):
        h = torch.relu(self.inp(x)).unsqueeze(0)   # fixed: (1, B, H), one step of B samples
        seq, _ = self.gru(h)
        return self.out(seq.squeeze(0)).squeeze(-1)


def fit(model, optimizer, loader, epochs):
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
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2048, FEATURES, generator=g)
    y = x[:, 0] * 0.8 - x[:, 3] * 0.5 + 0.1 * torch.randn(2048, generator=g)
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)
    model = LagRegressor()
    fit(model, torch.optim.Adam(model.parameters(), lr=2e-3), loader, epochs=2)


if __name__ == "__main__":
    main()
