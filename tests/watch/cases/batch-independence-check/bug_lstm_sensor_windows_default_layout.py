"""An activity classifier over sensor windows: the Dataset returns one (time, channels) window per
item, so the DataLoader batches are (batch, time, channels). The model's nn.LSTM keeps the default
batch_first=False, so it reads the batch axis as time and the 50 time steps as 50 separate
sequences, while the head was written for the batch-first layout: `out[:, -1]` takes, for every
"time step" (sample), the state of the last of the 50 "sequences", which has run along the samples
before it in the batch. A Trainer class holds the loop; nothing errors because the shapes still
fit."""
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

TIME, CHANNELS, CLASSES = 50, 6, 4


class SensorWindows(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, CLASSES, (n,), generator=g)
        t = torch.linspace(0, 6.28, TIME)
        freq = (1.0 + self.labels.float())[:, None, None]
        self.x = torch.sin(freq * t[None, :, None]) + 0.3 * torch.randn(n, TIME, CHANNELS, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.x[i], self.labels[i]


class ActivityLSTM(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.lstm = nn.LSTM(CHANNELS, hidden, num_layers=1)   # bug: batch_first=False, fed (B, T, C)
        self.head = nn.Linear(hidden, CLASSES)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


class Trainer:
    def __init__(self, model, loader, lr=3e-3):
        self.model, self.loader = model, loader
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.criterion = nn.CrossEntropyLoss()

    def fit(self, epochs):
        for epoch in range(epochs):
            self.model.train()
            total = 0.0
            for x, y in self.loader:
                self.optimizer.zero_grad()
                loss = self.criterion(self.model(x), y)
                loss.backward()
                self.optimizer.step()
                total += loss.item()
            print(f"epoch {epoch} loss {total / len(self.loader):.4f}")


def main():
    torch.manual_seed(0)
    loader = DataLoader(SensorWindows(1024, seed=0), batch_size=32, shuffle=True)
    Trainer(ActivityLSTM(), loader).fit(epochs=2)


if __name__ == "__main__":
    main()
