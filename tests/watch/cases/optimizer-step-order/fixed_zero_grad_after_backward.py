"""A trainer whose gradient bookkeeping sits in a helper, called where it belongs: before the
forward pass, so backward() fills fresh gradients and step() applies them."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model, lr=1e-2):
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.loss_fn = nn.CrossEntropyLoss()

    def reset_gradients(self):
        self.optimizer.zero_grad(set_to_none=True)

    def fit_batch(self, x, y):
        self.reset_gradients()
        loss = self.loss_fn(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def fit(self, loader, epochs):
        for _ in range(epochs):
            for x, y in loader:
                last = self.fit_batch(x, y)
        return last


def main():
    torch.manual_seed(0)
    x = torch.randn(512, 20)
    y = (x[:, :4].sum(dim=1) > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 2))
    print(f"final loss {Trainer(model).fit(loader, epochs=4):.3f}")


if __name__ == "__main__":
    main()
