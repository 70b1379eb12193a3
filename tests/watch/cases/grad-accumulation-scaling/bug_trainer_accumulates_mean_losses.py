"""A Trainer class with gradient accumulation for a small image classifier: fit() calls backward()
on every micro-batch's CrossEntropyLoss (a mean over the micro-batch) and steps SGD only every
accum_steps micro-batches, but the loss is never divided by accum_steps, so each update applies
the sum of four mean gradients: four times the gradient of the 64-image batch it stands for."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_model():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(8 * 8 * 8, 10))


class Trainer:
    def __init__(self, model, accum_steps=4, lr=0.02):
        self.model, self.accum_steps = model, accum_steps
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        self.criterion = nn.CrossEntropyLoss()

    def micro_step(self, x, y):
        loss = self.criterion(self.model(x), y)
        loss.backward()
        return loss.item()

    def fit(self, loader, epochs):
        for epoch in range(epochs):
            self.model.train()
            self.optimizer.zero_grad()
            for i, (x, y) in enumerate(loader):
                loss = self.micro_step(x, y)
                if (i + 1) % self.accum_steps == 0:
                    self.optimizer.step()
                    self.optimizer.zero_grad()
            print(f"epoch {epoch} last micro-batch loss {loss:.3f}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2048, 1, 16, 16, generator=g)
    y = (x[:, 0, :4, :4].flatten(1) @ torch.randn(16, 10, generator=g)).argmax(1)
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, generator=g)
    Trainer(make_model()).fit(loader, epochs=2)


if __name__ == "__main__":
    main()
