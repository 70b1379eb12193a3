"""Point-cloud classification in the shape of a PointNet reimplementation: an input
transform net (STN3d) predicts a 3x3 matrix, a shared per-point MLP of Conv1d+BatchNorm
layers is max-pooled into a global feature, and `PointNetCls` runs fc+BatchNorm+dropout
layers and returns `(log_probs, trans)`. The training script loops over epochs and
batches, transposes the points to (B, 3, N), calls `optimizer.zero_grad()`, puts the
classifier in train mode, takes `F.nll_loss(pred, target)`, steps the optimizer and a
StepLR scheduler, and reports train and test accuracy. The bug: the classifier's last
line is `F.log_softmax(x, dim=0)`, which normalises each class column over the samples
of the batch instead of each sample over its classes. NLL on those values trains a
ranking of samples within the batch: the loss starts near log(batch_size) rather than
log(num_classes) and stays far from zero even at 100% train accuracy, the class-prior
bias gets no gradient, the outputs are not per-sample probabilities, and the predicted
class of a point cloud depends on what else is in its batch. The run finishes without
an error and with a plausible accuracy, so the misleading loss goes unnoticed.

Thread: https://github.com/fxia22/pointnet.pytorch/issues/27
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

N_PTS = 64
K = 4


class STN3d(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv1d(3, 32, 1)
        self.conv2 = nn.Conv1d(32, 64, 1)
        self.fc1 = nn.Linear(64, 32)
        self.fc2 = nn.Linear(32, 9)
        self.bn1 = nn.BatchNorm1d(32)
        self.bn2 = nn.BatchNorm1d(64)
        self.bn3 = nn.BatchNorm1d(32)

    def forward(self, x):
        b = x.size(0)
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = torch.max(x, 2)[0]
        x = F.relu(self.bn3(self.fc1(x)))
        x = self.fc2(x)
        iden = torch.eye(3).view(1, 9).repeat(b, 1)
        return (x + iden).view(-1, 3, 3)


class PointNetfeat(nn.Module):
    def __init__(self):
        super().__init__()
        self.stn = STN3d()
        self.conv1 = nn.Conv1d(3, 32, 1)
        self.conv2 = nn.Conv1d(32, 64, 1)
        self.conv3 = nn.Conv1d(64, 128, 1)
        self.bn1 = nn.BatchNorm1d(32)
        self.bn2 = nn.BatchNorm1d(64)
        self.bn3 = nn.BatchNorm1d(128)

    def forward(self, x):
        trans = self.stn(x)
        x = torch.bmm(x.transpose(2, 1), trans).transpose(2, 1)
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = self.bn3(self.conv3(x))
        return torch.max(x, 2)[0], trans


class PointNetCls(nn.Module):
    def __init__(self, k=K):
        super().__init__()
        self.feat = PointNetfeat()
        self.fc1 = nn.Linear(128, 64)
        self.fc2 = nn.Linear(64, 32)
        self.fc3 = nn.Linear(32, k)
        self.dropout = nn.Dropout(p=0.3)
        self.bn1 = nn.BatchNorm1d(64)
        self.bn2 = nn.BatchNorm1d(32)

    def forward(self, x):
        x, trans = self.feat(x)
        x = F.relu(self.bn1(self.fc1(x)))
        x = F.relu(self.bn2(self.dropout(self.fc2(x))))
        x = self.fc3(x)
        return F.log_softmax(x, dim=0), trans


def sample_shape(label, gen):
    u = torch.rand(N_PTS, 3, generator=gen)
    if label == 0:  # sphere surface
        p = torch.randn(N_PTS, 3, generator=gen)
        p = p / p.norm(dim=1, keepdim=True)
    elif label == 1:  # cube surface
        p = u * 2 - 1
        face = torch.randint(0, 3, (N_PTS,), generator=gen)
        sign = torch.randint(0, 2, (N_PTS,), generator=gen).float() * 2 - 1
        p[torch.arange(N_PTS), face] = sign
    elif label == 2:  # cylinder side
        th = u[:, 0] * 2 * math.pi
        p = torch.stack([th.cos(), th.sin(), u[:, 1] * 2 - 1], 1)
    else:  # flat disc
        th, r = u[:, 0] * 2 * math.pi, u[:, 1].sqrt()
        p = torch.stack([r * th.cos(), r * th.sin(), (u[:, 2] - 0.5) * 0.1], 1)
    scale = 0.7 + 0.6 * torch.rand(1, 3, generator=gen)
    a = float(torch.rand(1, generator=gen)) * 2 * math.pi  # rotation about z
    rot = torch.tensor([[math.cos(a), -math.sin(a), 0.0], [math.sin(a), math.cos(a), 0.0], [0.0, 0.0, 1.0]])
    return (p * scale) @ rot.T + 0.02 * torch.randn(N_PTS, 3, generator=gen)


def make_split(n, gen):
    # class frequencies are uneven, as in real shape datasets
    labels = torch.multinomial(torch.tensor([0.45, 0.3, 0.15, 0.1]), n, replacement=True, generator=gen)
    pts = torch.stack([sample_shape(int(l), gen) for l in labels])
    return pts, labels


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    train_pts, train_y = make_split(1536, gen)
    test_pts, test_y = make_split(400, gen)
    batch_size = 32
    classifier = PointNetCls(k=K)
    optimizer = torch.optim.Adam(classifier.parameters(), lr=0.001, betas=(0.9, 0.999))
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    num_batch = len(train_pts) // batch_size
    for epoch in range(3):
        perm = torch.randperm(len(train_pts), generator=gen)
        for i in range(num_batch):
            idx = perm[i * batch_size:(i + 1) * batch_size]
            points, target = train_pts[idx], train_y[idx]
            points = points.transpose(2, 1)
            optimizer.zero_grad()
            classifier = classifier.train()
            pred, trans = classifier(points)
            loss = F.nll_loss(pred, target)
            loss.backward()
            optimizer.step()
            if i % 16 == 0:
                correct = pred.argmax(1).eq(target).sum().item()
                print(f"[{epoch}: {i}/{num_batch}] train loss: {loss.item():.4f} accuracy: {correct / batch_size:.3f}")
        scheduler.step()
        classifier = classifier.eval()
        with torch.no_grad():
            correct = 0
            for j in range(0, len(test_pts), 50):
                pred, _ = classifier(test_pts[j:j + 50].transpose(2, 1))
                correct += pred.argmax(1).eq(test_y[j:j + 50]).sum().item()
        print(f"[{epoch}] test accuracy: {correct / len(test_pts):.3f}")


if __name__ == "__main__":
    main()
