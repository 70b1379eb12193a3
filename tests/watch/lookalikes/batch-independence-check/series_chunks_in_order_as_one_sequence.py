"""One long series read in order: the DataLoader's sampler walks the rows in order from a random
offset each epoch (no shuffling), so each batch of 32 rows is 32 consecutive time steps, and the model runs its nn.LSTM (batch_first=False) over them as one
sequence of 32 steps, (32, 1, features), predicting the next value at every step. Reading the batch
as time is what is meant here: the rows are a sequence, kept in order."""
import torch
from torch import nn
from torch.utils.data import DataLoader, Sampler, TensorDataset


class OffsetInOrder(Sampler):
    """Every row once, in order, starting at a random row and wrapping around."""

    def __init__(self, n, generator):
        self.n, self.generator = n, generator

    def __len__(self):
        return self.n

    def __iter__(self):
        start = int(torch.randint(0, self.n, (1,), generator=self.generator))
        return iter([(start + i) % self.n for i in range(self.n)])


class StepPredictor(nn.Module):
    def __init__(self, features=3, hidden=16):
        super().__init__()
        self.lstm = nn.LSTM(features, hidden)
        self.out = nn.Linear(hidden, 1)

    def forward(self, rows):
        seq, _ = self.lstm(rows.unsqueeze(1))   # (T, 1, H): the ordered rows are the steps
        return self.out(seq.squeeze(1)).squeeze(-1)


def main():
    torch.manual_seed(0)
    t = torch.arange(4096, dtype=torch.float32)
    series = torch.stack([torch.sin(t / 20), torch.cos(t / 33), torch.sin(t / 7)], dim=1)
    target = torch.roll(series[:, 0], -1)
    loader = DataLoader(TensorDataset(series, target), batch_size=32,
                        sampler=OffsetInOrder(len(series), torch.Generator().manual_seed(0)))
    model = StepPredictor()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(2):
        for rows, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(rows), y)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
