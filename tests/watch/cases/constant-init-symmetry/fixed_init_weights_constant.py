"""A model whose init_weights() (applied with model.apply) draws every Linear weight with Xavier
initialisation and sets the biases to zero: the hidden units start different and learn apart."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Classifier(nn.Module):
    def __init__(self, features=10, hidden=64, classes=4):
        super().__init__()
        self.fc1 = nn.Linear(features, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, classes)
        self.apply(self.init_weights)

    @staticmethod
    def init_weights(m):
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)

    def forward(self, x):
        return self.out(torch.tanh(self.fc2(torch.tanh(self.fc1(x)))))


def train(model, loader, optimizer, epochs):
    for epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.3f}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 10, generator=g)
    y = (x[:, :4] @ torch.randn(4, 4, generator=g)).argmax(1)
    model = Classifier()
    train(model, DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g),
          torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), epochs=4)


if __name__ == "__main__":
    main()
