"""A classifier trained with F.nll_loss on the output of its last Linear layer: the log_softmax
that NLL needs was forgotten, so the loss goes negative and keeps falling."""
import torch
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def train(model, optimizer, data, epochs):
    x, y = data
    for _ in range(epochs):
        for i in range(0, len(x), 50):
            optimizer.zero_grad()
            out = model(x[i:i + 50])
            loss = F.nll_loss(out, y[i:i + 50])
            loss.backward()
            optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    x = torch.randn(500, 10)
    y = (x[:, :4] * torch.tensor([1.0, -1.0, 0.5, 2.0])).argmax(1)
    model = Net()
    print(f"loss {train(model, torch.optim.SGD(model.parameters(), lr=0.05), (x, y), epochs=6):.3f}")


if __name__ == "__main__":
    main()
