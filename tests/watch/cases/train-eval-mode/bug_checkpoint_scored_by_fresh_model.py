"""A Trainer keeps the best weights of a tabular classifier as a serialized checkpoint; a separate
score_checkpoint(build, checkpoint, loader) helper builds a fresh model from the factory it is
given, loads the checkpoint with load_state_dict and scores it under torch.inference_mode(), but
never calls model.eval(): the fresh model is in the training mode it was built in, so dropout
thins every prediction and BatchNorm normalizes each test batch with its own statistics (and
overwrites the loaded running statistics). The reported score is not that of the checkpoint."""
import io

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def build_model():
    return nn.Sequential(nn.Linear(16, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Dropout(0.4),
                         nn.Linear(64, 32), nn.ReLU(), nn.Dropout(0.4), nn.Linear(32, 4))


def make_split(n, g):
    centers = torch.randn(4, 16, generator=torch.Generator().manual_seed(7)) * 1.5
    y = torch.randint(0, 4, (n,), generator=g)
    return TensorDataset(centers[y] + torch.randn(n, 16, generator=g), y)


class Trainer:
    def __init__(self, model, loader):
        self.model, self.loader = model, loader
        self.optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
        self.criterion = nn.CrossEntropyLoss()
        self.best = None

    def fit(self, epochs):
        for _ in range(epochs):
            self.model.train()
            total = 0.0
            for x, y in self.loader:
                loss = self.criterion(self.model(x), y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                total += loss.item()
            if self.best is None or total < self.best[0]:
                buffer = io.BytesIO()
                torch.save(self.model.state_dict(), buffer)
                self.best = (total, buffer.getvalue())
        return self.best[1]


def score_checkpoint(build, checkpoint, loader):
    model = build()
    model.load_state_dict(torch.load(io.BytesIO(checkpoint)))
    correct = 0
    with torch.inference_mode():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
    return correct / len(loader.dataset)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    train = DataLoader(make_split(704, g), batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(2))
    test = DataLoader(make_split(320, g), batch_size=64)
    checkpoint = Trainer(build_model(), train).fit(epochs=3)  # 33 steps: the scoring runs between sampled steps
    print(f"checkpoint accuracy {score_checkpoint(build_model, checkpoint, test):.3f}")


if __name__ == "__main__":
    main()
