"""A sequence classifier that pools a GRU's states with learned attention: each time step gets a
score, the scores (batch, time) are turned into weights with torch.softmax(scores, dim=1), over each
sample's own time steps, and the weighted states are summed over time."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

T, FEATURES, CLASSES = 20, 6, 3


class AttentionPoolClassifier(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.rnn = nn.GRU(FEATURES, hidden, batch_first=True)
        self.score = nn.Linear(hidden, 1)
        self.head = nn.Linear(hidden, CLASSES)

    def forward(self, x):
        states, _ = self.rnn(x)                       # (batch, time, hidden)
        scores = self.score(states).squeeze(-1)       # (batch, time)
        weights = torch.softmax(scores, dim=1)
        pooled = (weights.unsqueeze(-1) * states).sum(dim=1)
        return self.head(pooled)


class Trainer:
    def __init__(self, model, lr=3e-3):
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.criterion = nn.CrossEntropyLoss()

    def fit(self, loader, epochs):
        for epoch in range(epochs):
            self.model.train()
            for x, y in loader:
                self.optimizer.zero_grad()
                loss = self.criterion(self.model(x), y)
                loss.backward()
                self.optimizer.step()
            print(f"epoch {epoch} loss {loss.item():.3f}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(960, T, FEATURES, generator=g)
    y = (x[:, :, :CLASSES].mean(1) * 3).argmax(1)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g)
    Trainer(AttentionPoolClassifier()).fit(loader, epochs=3)


if __name__ == "__main__":
    main()
