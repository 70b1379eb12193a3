"""A course's PyTorch basics tutorial: a Dataset subclass generating y = 2x^2 + 3x + 17, a DataLoader
with a collate function that wraps each scalar into a feature vector, a two-layer MLP, MSELoss and
plain SGD (lr 1e-4), trained for a few epochs with train/test loss printed per epoch. The batch loop
does forward, loss, backward and optimizer.step() but never calls optimizer.zero_grad(), so every
step applies the sum of all gradients computed so far.

Thread: https://github.com/IKMLab/course_material/issues/3
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.optim import SGD
from torch.utils.data import DataLoader, Dataset


class QuadraticDataset(Dataset):
    def __init__(self, size, seed):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.rand(size, generator=g) * 2 - 1
        self.y = 2 * self.x ** 2 + 3 * self.x + 17

    def __len__(self):
        return len(self.x)

    def __getitem__(self, index):
        return self.x[index], self.y[index]


def to_columns(batch):
    xs = [[float(x)] for x, _ in batch]
    ys = [[float(y)] for _, y in batch]
    return torch.tensor(xs), torch.tensor(ys)


class TwoLayerNet(nn.Module):
    def __init__(self, in_dim, hid_dim, out_dim):
        super().__init__()
        self.layer1 = nn.Linear(in_dim, hid_dim)
        self.layer2 = nn.Linear(hid_dim, out_dim)

    def forward(self, batch_x):
        return self.layer2(F.relu(self.layer1(batch_x)))


def mean_loss(model, loader, criterion):
    total = 0.0
    with torch.no_grad():
        for batch_x, batch_y in loader:
            total += float(criterion(model(batch_x), batch_y)) / len(loader)
    return total


def main():
    torch.manual_seed(0)
    batch_size, n_epoch, hid_dim = 50, 5, 10
    train_loader = DataLoader(QuadraticDataset(1000, seed=1), batch_size=batch_size, shuffle=True,
                              collate_fn=to_columns, generator=torch.Generator().manual_seed(0))
    test_loader = DataLoader(QuadraticDataset(500, seed=2), batch_size=batch_size, shuffle=False,
                             collate_fn=to_columns)

    model = TwoLayerNet(in_dim=1, hid_dim=hid_dim, out_dim=1)
    criterion = nn.MSELoss()
    optimizer = SGD(model.parameters(), lr=0.0001)

    for epoch in range(n_epoch):
        for batch_x, batch_y in train_loader:
            pred_y = model(batch_x)
            loss = criterion(pred_y, batch_y)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} training loss {mean_loss(model, train_loader, criterion):.4f} "
              f"testing loss {mean_loss(model, test_loader, criterion):.4f}")


if __name__ == "__main__":
    main()
