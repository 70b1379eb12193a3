"""A sequence-first (time, batch, features) encoder, as older seq2seq code writes it: a collate
function transposes each batch, the GRU runs with batch_first=False, and attention pooling takes
softmax(scores, dim=0) over a (time, batch) score matrix, which is the time axis here, so each
sequence's weights sum to 1 over its own steps."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

T, FEATURES, CLASSES = 12, 5, 4


def time_first(batch):
    x = torch.stack([b[0] for b in batch]).transpose(0, 1)   # (time, batch, features)
    y = torch.stack([b[1] for b in batch])
    return x, y


class Encoder(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.rnn = nn.GRU(FEATURES, hidden)
        self.score = nn.Linear(hidden, 1)
        self.out = nn.Linear(hidden, CLASSES)

    def forward(self, x):
        states, _ = self.rnn(x)                             # (time, batch, hidden)
        weights = torch.softmax(self.score(states).squeeze(-1), dim=0)
        context = (weights.unsqueeze(-1) * states).sum(0)   # (batch, hidden)
        return self.out(context)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(800, T, FEATURES, generator=g)
    y = x[:, -3:, :CLASSES].sum(1).argmax(1)
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, generator=g, collate_fn=time_first)
    model = Encoder()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(2):
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
