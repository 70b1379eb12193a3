"""Batches come batch-first, (batch, time, features), and the model transposes them to
(time, batch, features) before an nn.GRU left at batch_first=False, then reads the last step of
each sample: the layout is right, only written the older way."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class GRUForecaster(nn.Module):
    def __init__(self, features=4, hidden=32):
        super().__init__()
        self.gru = nn.GRU(features, hidden, num_layers=2)
        self.out = nn.Linear(hidden, 1)

    def forward(self, x):
        seq, _ = self.gru(x.transpose(0, 1))   # (T, B, H)
        return self.out(seq[-1]).squeeze(-1)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1024, 30, 4, generator=g).cumsum(1) * 0.1
    y = x[:, -1, 0] + 0.5 * x[:, -5, 1]
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    model = GRUForecaster()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    for epoch in range(2):
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(xb), yb)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
