"""A DeepRank-style learner: a NeuralNet class wraps a small 3-D CNN (Conv3d + BatchNorm3d + dropout)
that scores voxelised protein-interface grids, owns the optimizer and the loss, and has train()
and test() methods. Both go through one shared _epoch(loader, train_model) helper that runs the
forward pass over a loader, accumulates loss and accuracy, and only when train_model is True does
zero_grad / backward / step. train() alternates a training epoch and a validation epoch and keeps
the epoch with the best validation loss; test() runs one more epoch on the test set.

Bug: the model's train/eval mode is never switched. _epoch only uses train_model to decide
whether to back-propagate, so validation and test passes run with dropout active and BatchNorm
normalising by each evaluation batch (and folding evaluation batches into its running
statistics). The validation loss used to pick the best epoch and the reported test accuracy are
measured on a randomly thinned, batch-dependent network rather than the trained one.

Thread: https://github.com/DeepRank/deeprank/issues/20
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class CNN3D(nn.Module):
    def __init__(self, in_channels=2):
        super().__init__()
        self.conv1 = nn.Conv3d(in_channels, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm3d(8)
        self.conv2 = nn.Conv3d(8, 16, 3, padding=1)
        self.bn2 = nn.BatchNorm3d(16)
        self.fc1 = nn.Linear(16 * 2 * 2 * 2, 32)
        self.drop = nn.Dropout(0.5)
        self.fc2 = nn.Linear(32, 2)

    def forward(self, x):
        x = F.max_pool3d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool3d(F.relu(self.bn2(self.conv2(x))), 2)
        x = self.drop(F.relu(self.fc1(x.flatten(1))))
        return self.fc2(x)


class NeuralNet:
    def __init__(self, model, lr=1e-3, batch_size=16):
        self.net = model
        self.batch_size = batch_size
        self.criterion = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=lr)
        self.best_state = None

    def _epoch(self, loader, train_model):
        running_loss, correct, n = 0.0, 0, 0
        for inputs, targets in loader:
            outputs = self.net(inputs)
            loss = self.criterion(outputs, targets)
            if train_model:
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            running_loss += loss.item() * len(targets)
            correct += (outputs.argmax(1) == targets).sum().item()
            n += len(targets)
        return running_loss / n, correct / n

    def train(self, train_loader, valid_loader, nepoch=5):
        best_valid = float("inf")
        for epoch in range(nepoch):
            train_loss, train_acc = self._epoch(train_loader, train_model=True)
            valid_loss, valid_acc = self._epoch(valid_loader, train_model=False)
            if valid_loss < best_valid:
                best_valid = valid_loss
                self.best_state = {k: v.clone() for k, v in self.net.state_dict().items()}
            print(f"epoch {epoch} train loss {train_loss:.4f} acc {train_acc:.3f} | "
                  f"valid loss {valid_loss:.4f} acc {valid_acc:.3f}")

    def test(self, test_loader):
        self.net.load_state_dict(self.best_state)
        test_loss, test_acc = self._epoch(test_loader, train_model=False)
        print(f"test loss {test_loss:.4f} acc {test_acc:.3f}")


def make_grids(n, g):
    y = torch.randint(0, 2, (n,), generator=g)
    x = torch.randn(n, 2, 8, 8, 8, generator=g)
    # binders carry a denser blob of atoms of channel 0 near the interface centre
    x[:, 0, 2:6, 2:6, 2:6] += 0.6 * y.view(-1, 1, 1, 1).float() + 0.3
    x[:, 1] += 0.2 * (1 - y).view(-1, 1, 1, 1).float()
    return x, y


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x, y = make_grids(1100, g)
    train = TensorDataset(x[:800], y[:800])
    valid = TensorDataset(x[800:950], y[800:950])
    test = TensorDataset(x[950:], y[950:])
    learner = NeuralNet(CNN3D(), lr=1e-3, batch_size=16)
    train_loader = DataLoader(train, batch_size=16, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    valid_loader = DataLoader(valid, batch_size=16)
    test_loader = DataLoader(test, batch_size=16)
    learner.train(train_loader, valid_loader, nepoch=3)
    learner.test(test_loader)


if __name__ == "__main__":
    main()
