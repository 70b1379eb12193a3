"""A PointNet classification training script: a script-level epoch/batch loop trains a
PointNetCls (shared per-point Conv1d layers with BatchNorm1d, a max-pool over points and a
BatchNorm'd fully connected head ending in log_softmax) with SGD and F.nll_loss, and every 10
batches it draws one batch from the shuffled test loader and prints a test loss and accuracy.
The script never calls classifier.eval() (nor classifier.train()), so the test forward runs in
training mode: BatchNorm normalises each test batch with its own statistics and writes the test
batch into its running buffers, and the printed test accuracy is not the model's accuracy.

Thread: https://github.com/fxia22/pointnet.pytorch/pull/19
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class PointFeatures(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv1d(3, 32, 1)
        self.conv2 = nn.Conv1d(32, 64, 1)
        self.conv3 = nn.Conv1d(64, 128, 1)
        self.bn1 = nn.BatchNorm1d(32)
        self.bn2 = nn.BatchNorm1d(64)
        self.bn3 = nn.BatchNorm1d(128)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = self.bn3(self.conv3(x))
        return torch.max(x, 2)[0]


class PointNetCls(nn.Module):
    def __init__(self, k=4):
        super().__init__()
        self.feat = PointFeatures()
        self.fc1 = nn.Linear(128, 64)
        self.fc2 = nn.Linear(64, 32)
        self.fc3 = nn.Linear(32, k)
        self.bn1 = nn.BatchNorm1d(64)
        self.bn2 = nn.BatchNorm1d(32)

    def forward(self, x):
        x = self.feat(x)
        x = F.relu(self.bn1(self.fc1(x)))
        x = F.relu(self.bn2(self.fc2(x)))
        return F.log_softmax(self.fc3(x), dim=-1)


def shape_clouds(n, seed, k=4, points=128):
    """Point clouds of k shape classes: anisotropic blobs, stretched along a class-dependent axis."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, k, (n,), generator=g)
    scale = torch.ones(n, 3)
    scale[torch.arange(n), y % 3] = 2.5
    scale[y == 3] = 1.6
    pts = torch.randn(n, points, 3, generator=g) * scale.unsqueeze(1) + 0.3
    return TensorDataset(pts, y.unsqueeze(1))


def main():
    torch.manual_seed(1)
    batch_size, nepoch = 16, 3
    dataset = shape_clouds(480, seed=0)
    test_dataset = shape_clouds(160, seed=1)
    dataloader = DataLoader(dataset, batch_size=batch_size, shuffle=True,
                            generator=torch.Generator().manual_seed(0))
    testdataloader = DataLoader(test_dataset, batch_size=batch_size, shuffle=True,
                                generator=torch.Generator().manual_seed(1))

    classifier = PointNetCls(k=4)
    optimizer = torch.optim.SGD(classifier.parameters(), lr=0.01, momentum=0.9)
    num_batch = len(dataset) / batch_size

    for epoch in range(nepoch):
        for i, (points, target) in enumerate(dataloader, 0):
            target = target[:, 0]
            points = points.transpose(2, 1)
            optimizer.zero_grad()
            pred = classifier(points)
            loss = F.nll_loss(pred, target)
            loss.backward()
            optimizer.step()
            correct = pred.detach().max(1)[1].eq(target).sum().item()
            if i % 10 == 0:
                print(f"[{epoch}: {i}/{num_batch:.0f}] train loss: {loss.item():.4f} "
                      f"accuracy: {correct / batch_size:.3f}")

            if i % 10 == 0:
                _, (points, target) = next(enumerate(testdataloader, 0))
                target = target[:, 0]
                points = points.transpose(2, 1)
                pred = classifier(points)
                loss = F.nll_loss(pred, target)
                correct = pred.detach().max(1)[1].eq(target).sum().item()
                print(f"[{epoch}: {i}/{num_batch:.0f}] test loss: {loss.item():.4f} "
                      f"accuracy: {correct / batch_size:.3f}")


if __name__ == "__main__":
    main()
