"""A from-scratch dropout MLP in the textbook style: a dropout_layer(X, dropout) function, a Net
class that applies it when its own is_training flag is set, and a train_ch3(net, train_iter,
test_iter, loss, num_epochs, updater) helper whose evaluate_accuracy(net, data_iter) calls
net.eval(). The flag is fixed to True in the constructor and never tied to the module's training
mode, so the test accuracy is measured with dropout still on.

Thread: https://github.com/d2l-ai/d2l-en/issues/1093
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def dropout_layer(X, dropout):
    assert 0 <= dropout <= 1
    if dropout == 1:
        return torch.zeros_like(X)
    if dropout == 0:
        return X
    mask = (torch.rand(X.shape) > dropout).float()
    return mask * X / (1.0 - dropout)


dropout1, dropout2 = 0.5, 0.5


class Net(nn.Module):
    def __init__(self, num_inputs, num_outputs, num_hiddens1, num_hiddens2, is_training=True):
        super().__init__()
        self.num_inputs = num_inputs
        self.is_training = is_training
        self.lin1 = nn.Linear(num_inputs, num_hiddens1)
        self.lin2 = nn.Linear(num_hiddens1, num_hiddens2)
        self.lin3 = nn.Linear(num_hiddens2, num_outputs)
        self.relu = nn.ReLU()

    def forward(self, X):
        H1 = self.relu(self.lin1(X.reshape((-1, self.num_inputs))))
        if self.is_training:
            H1 = dropout_layer(H1, dropout1)
        H2 = self.relu(self.lin2(H1))
        if self.is_training:
            H2 = dropout_layer(H2, dropout2)
        return self.lin3(H2)


class Accumulator:
    def __init__(self, n):
        self.data = [0.0] * n

    def add(self, *args):
        self.data = [a + float(b) for a, b in zip(self.data, args)]

    def __getitem__(self, idx):
        return self.data[idx]


def accuracy(y_hat, y):
    return float((y_hat.argmax(axis=1).type(y.dtype) == y).sum())


def evaluate_accuracy(net, data_iter):
    net.eval()
    metric = Accumulator(2)
    with torch.no_grad():
        for X, y in data_iter:
            metric.add(accuracy(net(X), y), y.numel())
    return metric[0] / metric[1]


def train_epoch_ch3(net, train_iter, loss, updater):
    net.train()
    metric = Accumulator(3)
    for X, y in train_iter:
        y_hat = net(X)
        batch_loss = loss(y_hat, y)
        updater.zero_grad()
        batch_loss.mean().backward()
        updater.step()
        metric.add(float(batch_loss.sum().detach()), accuracy(y_hat, y), y.numel())
    return metric[0] / metric[2], metric[1] / metric[2]


def train_ch3(net, train_iter, test_iter, loss, num_epochs, updater):
    for epoch in range(num_epochs):
        train_loss, train_acc = train_epoch_ch3(net, train_iter, loss, updater)
        test_acc = evaluate_accuracy(net, test_iter)
        test_acc_again = evaluate_accuracy(net, test_iter)
        print(f"epoch {epoch + 1}, loss {train_loss:.3f}, train acc {train_acc:.3f}, "
              f"test acc {test_acc:.3f} (repeat: {test_acc_again:.3f})")


def fashion_like(n, seed):
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(10, 196, generator=torch.Generator().manual_seed(7))
    y = torch.randint(0, 10, (n,), generator=g)
    X = protos[y] + 4.0 * torch.randn(n, 196, generator=g)
    return TensorDataset(X.reshape(n, 1, 14, 14), y)


def main():
    torch.manual_seed(0)
    net = Net(196, 10, 256, 256)
    train_iter = DataLoader(fashion_like(6000, 0), batch_size=256, shuffle=True,
                            generator=torch.Generator().manual_seed(0))
    test_iter = DataLoader(fashion_like(2000, 1), batch_size=256)
    loss = nn.CrossEntropyLoss(reduction="none")
    trainer = torch.optim.SGD(net.parameters(), lr=0.5)
    train_ch3(net, train_iter, test_iter, loss, 4, trainer)


if __name__ == "__main__":
    main()
