"""A classifier trained by a Trainer class that validates every 20 steps. Its validate() loops
over range(len(val_loader)) and takes each batch as next(iter(self.val_loader)); the validation
loader does not shuffle, so every one of those iterators starts over and yields the same first
batch. The reported validation accuracy is measured on 16 samples, repeated len(val_loader) times."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model, train_loader, val_loader, lr=1e-3, validate_every=20):
        self.model, self.train_loader, self.val_loader = model, train_loader, val_loader
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.validate_every = validate_every

    @torch.no_grad()
    def validate(self):
        self.model.eval()
        correct = seen = 0
        for _ in range(len(self.val_loader)):
            x, y = next(iter(self.val_loader))
            correct += (self.model(x).argmax(1) == y).sum().item()
            seen += len(y)
        self.model.train()
        return correct / seen

    def fit(self, epochs):
        step = 0
        for _ in range(epochs):
            for x, y in self.train_loader:
                loss = F.cross_entropy(self.model(x), y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                step += 1
                if step % self.validate_every == 0:
                    print(f"step {step} loss {loss.item():.3f} val acc {self.validate():.3f}")


def make_split(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 12, generator=g)
    return TensorDataset(x, (x[:, 0] > 0).long() + (x[:, 1] > 0).long())


def main():
    torch.manual_seed(0)
    train_loader = DataLoader(make_split(640, 0), batch_size=16, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    val_loader = DataLoader(make_split(160, 1), batch_size=16)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 3))
    Trainer(model, train_loader, val_loader).fit(epochs=2)


if __name__ == "__main__":
    main()
