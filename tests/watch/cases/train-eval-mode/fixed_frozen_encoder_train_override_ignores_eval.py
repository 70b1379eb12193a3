"""A text classifier over a frozen pretrained-style encoder wrapped in a FrozenEncoder module whose
train(mode) is overridden to keep the encoder frozen: it calls super().train(mode), so model.eval()
still reaches the encoder's dropout layers, and then only keeps its parameters without gradients.
A Trainer class runs fit() and evaluate()."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB, SEQ = 50, 12


class FrozenEncoder(nn.Module):
    def __init__(self, dim=48):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.drop = nn.Dropout(0.3)
        self.proj = nn.Sequential(nn.Linear(dim, dim), nn.Tanh(), nn.Dropout(0.3))
        for p in self.parameters():
            p.requires_grad_(False)

    def train(self, mode=True):
        super().train(mode)   # fixed: the mode reaches the dropout layers; the weights stay frozen
        return self

    def forward(self, ids):
        return self.proj(self.drop(self.embed(ids))).mean(1)


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = FrozenEncoder()
        self.head = nn.Sequential(nn.Linear(48, 64), nn.ReLU(), nn.Linear(64, 2))

    def forward(self, ids):
        return self.head(self.encoder(ids))


class Trainer:
    def __init__(self, model, train_loader, val_loader):
        self.model, self.train_loader, self.val_loader = model, train_loader, val_loader
        self.optimizer = torch.optim.Adam(model.head.parameters(), lr=3e-3)

    def evaluate(self):
        self.model.eval()
        correct = 0
        with torch.no_grad():
            for ids, y in self.val_loader:
                correct += (self.model(ids).argmax(1) == y).sum().item()
        return correct / len(self.val_loader.dataset)

    def fit(self, epochs):
        for epoch in range(epochs):
            self.model.train()
            for ids, y in self.train_loader:
                loss = F.cross_entropy(self.model(ids), y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            print(f"epoch {epoch} val acc {self.evaluate():.3f}")


def make(n, g):
    ids = torch.randint(0, VOCAB, (n, SEQ), generator=g)
    return ids, (ids < 10).sum(1).gt(2).long()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    train = DataLoader(TensorDataset(*make(640, g)), batch_size=32, shuffle=True)
    val = DataLoader(TensorDataset(*make(256, g)), batch_size=64)
    Trainer(Classifier(), train, val).fit(epochs=3)


if __name__ == "__main__":
    main()
