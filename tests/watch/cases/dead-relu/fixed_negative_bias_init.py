"""A Trainer class with an init_weights() method; the fix: the hidden biases start at 0 (and the
weights with Kaiming init for ReLU), so about half the units fire for each example."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class MLP(nn.Module):
    def __init__(self, features, hidden, classes):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.head(self.layers(x))


class Trainer:
    def __init__(self, model, lr=1e-3):
        self.model = model
        self.init_weights()
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.loss_fn = nn.CrossEntropyLoss()

    def init_weights(self):
        for m in self.model.layers:
            if isinstance(m, nn.Linear):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                nn.init.zeros_(m.bias)

    def fit(self, loader, epochs):
        for _ in range(epochs):
            self.model.train()
            for x, y in loader:
                self.optimizer.zero_grad()
                loss = self.loss_fn(self.model(x), y)
                loss.backward()
                self.optimizer.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1024, 20, generator=g)
    y = (x[:, :5] @ torch.randn(5, 4, generator=g)).argmax(1)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g)
    print(f"loss {Trainer(MLP(20, 128, 4)).fit(loader, epochs=2):.3f}")


if __name__ == "__main__":
    main()
