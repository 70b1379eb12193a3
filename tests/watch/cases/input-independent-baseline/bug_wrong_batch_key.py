"""A Trainer class over a Dataset that returns a dict per sample (features, mask, label). The
trainer's get_inputs() helper returns batch["mask"] instead of batch["features"], so the model
sees the same all-ones vector for every sample and can only learn the label prior: with
balanced classes the loss stays at ln(4)."""
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Records(Dataset):
    def __init__(self, n=640, features=16, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, features, generator=g)
        self.y = (self.x[:, 0] > 0).long() * 2 + (self.x[:, 1] > 0).long()
        self.mask = torch.ones(n, features)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return {"features": self.x[i], "mask": self.mask[i], "label": self.y[i]}


class Trainer:
    def __init__(self, model, loader):
        self.model, self.loader = model, loader
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        self.criterion = nn.CrossEntropyLoss()

    @staticmethod
    def get_inputs(batch):
        return batch["mask"]

    def train_epoch(self):
        for batch in self.loader:
            self.optimizer.zero_grad()
            loss = self.criterion(self.model(self.get_inputs(batch)), batch["label"])
            loss.backward()
            self.optimizer.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
    trainer = Trainer(model, DataLoader(Records(), batch_size=32, shuffle=True))
    for epoch in range(3):
        loss = trainer.train_epoch()
    print(f"loss {loss:.3f}")


if __name__ == "__main__":
    main()
