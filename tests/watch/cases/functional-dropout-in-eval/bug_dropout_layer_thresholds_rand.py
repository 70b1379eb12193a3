"""An MLP written from scratch, textbook style: a module-level dropout_layer(X, dropout) draws its
mask as `(torch.rand(X.shape) > dropout).float()` and rescales, and Net.forward applies it after
each hidden layer. forward() never asks self.training, so the accuracy a Trainer's evaluate()
reports under model.eval() and no_grad is that of a randomly thinned network."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

DROPOUT1, DROPOUT2 = 0.2, 0.5


def dropout_layer(X, dropout):
    if dropout == 1:
        return torch.zeros_like(X)
    mask = (torch.rand(X.shape) > dropout).float()
    return mask * X / (1.0 - dropout)


class Net(nn.Module):
    def __init__(self, num_inputs=20, num_outputs=4, hiddens=(64, 32)):
        super().__init__()
        self.lin1 = nn.Linear(num_inputs, hiddens[0])
        self.lin2 = nn.Linear(hiddens[0], hiddens[1])
        self.lin3 = nn.Linear(hiddens[1], num_outputs)
        self.relu = nn.ReLU()

    def forward(self, X):
        H1 = dropout_layer(self.relu(self.lin1(X)), DROPOUT1)
        H2 = dropout_layer(self.relu(self.lin2(H1)), DROPOUT2)
        return self.lin3(H2)


class Trainer:
    def __init__(self, model, lr=0.1):
        self.model = model
        self.loss = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr)

    def fit_epoch(self, loader):
        self.model.train()
        for X, y in loader:
            loss = self.loss(self.model(X), y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()

    def evaluate(self, loader):
        self.model.eval()
        correct = 0
        with torch.no_grad():
            for X, y in loader:
                correct += (self.model(X).argmax(1) == y).sum().item()
        return correct / len(loader.dataset)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    X = torch.randn(1200, 20, generator=g)
    y = (X[:, :4].argmax(1))
    train = DataLoader(TensorDataset(X[:1000], y[:1000]), batch_size=50, shuffle=True, generator=g)
    val = DataLoader(TensorDataset(X[1000:], y[1000:]), batch_size=100)
    trainer = Trainer(Net())
    for epoch in range(3):
        trainer.fit_epoch(train)
        print(f"epoch {epoch} val acc {trainer.evaluate(val):.3f}")


if __name__ == "__main__":
    main()
