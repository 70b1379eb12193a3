"""A Trainer class whose CosineAnnealingLR is sized in optimizer steps (T_max=epochs * batches
per epoch) and stepped after every batch: the rate falls along one half cosine over the whole
run."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model, epochs, steps_per_epoch, lr=0.05):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        self.scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(self.optimizer, T_max=epochs * steps_per_epoch)

    def train_step(self, x, y):
        loss = F.cross_entropy(self.model(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.scheduler.step()
        return loss.item()

    def fit(self, loader, epochs):
        for epoch in range(epochs):
            for x, y in loader:
                loss = self.train_step(x, y)
            print(f"epoch {epoch} loss {loss:.3f} lr {self.scheduler.get_last_lr()[0]:.4f}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(640, 12, generator=g)
    y = (x[:, :3] @ torch.randn(3, 3, generator=g)).argmax(1)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g)
    model = nn.Sequential(nn.Linear(12, 48), nn.ReLU(), nn.Linear(48, 3))
    Trainer(model, epochs=8, steps_per_epoch=len(loader)).fit(loader, epochs=8)


if __name__ == "__main__":
    main()
