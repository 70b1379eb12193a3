"""A siamese embedding network trained with a hand-written ContrastiveLoss(margin) through a
fit(train_loader, val_loader, model, loss_fn, optimizer, scheduler, n_epochs, log_interval) function
with train_epoch / test_epoch functions; the pair dataset draws a positive partner from the same
class or a negative partner from another class for every sample. The loss computes squared
distances and takes distances.sqrt() for the negative-pair hinge with no epsilon. The data holds
some exact duplicate images, so a positive pair is sometimes the same image twice: its distance is
exactly 0, the gradient of sqrt there is infinite, multiplied by the zero coefficient of that
branch it becomes NaN, and one such pair turns every weight into NaN. Nothing raises.

Thread: https://github.com/adambielski/siamese-triplet/issues/18
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


class EmbeddingNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.convnet = nn.Sequential(nn.Conv2d(1, 8, 3), nn.PReLU(), nn.MaxPool2d(2),
                                     nn.Conv2d(8, 16, 3), nn.PReLU(), nn.MaxPool2d(2))
        self.fc = nn.Sequential(nn.Linear(16 * 2 * 2, 64), nn.PReLU(), nn.Linear(64, 2))

    def forward(self, x):
        return self.fc(self.convnet(x).flatten(1))


class SiameseNet(nn.Module):
    def __init__(self, embedding_net):
        super().__init__()
        self.embedding_net = embedding_net

    def forward(self, x1, x2):
        return self.embedding_net(x1), self.embedding_net(x2)


class ContrastiveLoss(nn.Module):
    def __init__(self, margin):
        super().__init__()
        self.margin = margin

    def forward(self, output1, output2, target):
        distances = (output2 - output1).pow(2).sum(1)
        losses = 0.5 * (target.float() * distances
                        + (1 - target).float() * F.relu(self.margin - distances.sqrt()).pow(2))
        return losses.mean()


class SiamesePairs(Dataset):
    def __init__(self, images, labels, train, seed):
        self.images, self.labels, self.train = images, labels, train
        self.rng = np.random.RandomState(seed)
        self.labels_set = set(labels.tolist())
        self.label_to_indices = {c: np.where(labels.numpy() == c)[0] for c in self.labels_set}
        if not train:
            self.pairs = [self._pair(i) for i in range(len(labels))]

    def _pair(self, index):
        target = self.rng.randint(0, 2)
        label1 = self.labels[index].item()
        if target == 1:
            other = index
            while other == index:
                other = self.rng.choice(self.label_to_indices[label1])
        else:
            other_label = self.rng.choice(sorted(self.labels_set - {label1}))
            other = self.rng.choice(self.label_to_indices[other_label])
        return index, other, target

    def __getitem__(self, index):
        i, j, target = self._pair(index) if self.train else self.pairs[index]
        return (self.images[i], self.images[j]), target

    def __len__(self):
        return len(self.labels)


def make_images(n, n_dup, seed):
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(10, 1, 14, 14, generator=torch.Generator().manual_seed(5))
    labels = torch.randint(0, 10, (n - n_dup,), generator=g)
    images = protos[labels] + 0.8 * torch.randn(n - n_dup, 1, 14, 14, generator=g)
    dup = torch.randperm(n - n_dup, generator=g)[:n_dup]  # the same picture stored twice
    return torch.cat([images, images[dup]]), torch.cat([labels, labels[dup]])


def train_epoch(train_loader, model, loss_fn, optimizer, log_interval):
    model.train()
    losses, total_loss = [], 0.0
    for batch_idx, (data, target) in enumerate(train_loader):
        optimizer.zero_grad()
        outputs = model(*data)
        loss = loss_fn(*outputs, target)
        losses.append(loss.item())
        total_loss += loss.item()
        loss.backward()
        optimizer.step()
        if batch_idx % log_interval == 0:
            print(f"Train: [{batch_idx * len(target)}/{len(train_loader.dataset)}]\tLoss: {np.mean(losses):.6f}")
            losses = []
    return total_loss / (batch_idx + 1)


def test_epoch(val_loader, model, loss_fn):
    model.eval()
    val_loss = 0.0
    with torch.no_grad():
        for data, target in val_loader:
            val_loss += loss_fn(*model(*data), target).item()
    return val_loss / len(val_loader)


def fit(train_loader, val_loader, model, loss_fn, optimizer, scheduler, n_epochs, log_interval):
    for epoch in range(n_epochs):
        train_loss = train_epoch(train_loader, model, loss_fn, optimizer, log_interval)
        scheduler.step()
        val_loss = test_epoch(val_loader, model, loss_fn)
        print(f"Epoch: {epoch + 1}/{n_epochs}. Train set: Average loss: {train_loss:.4f}"
              f"\nEpoch: {epoch + 1}/{n_epochs}. Validation set: Average loss: {val_loss:.4f}")


def main():
    torch.manual_seed(0)
    train_images, train_labels = make_images(1000, 120, seed=1)
    test_images, test_labels = make_images(400, 0, seed=2)
    train_loader = DataLoader(SiamesePairs(train_images, train_labels, True, seed=3), batch_size=64,
                              shuffle=True, generator=torch.Generator().manual_seed(0))
    val_loader = DataLoader(SiamesePairs(test_images, test_labels, False, seed=4), batch_size=128)
    model = SiameseNet(EmbeddingNet())
    loss_fn = ContrastiveLoss(margin=1.0)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 8, gamma=0.1)
    fit(train_loader, val_loader, model, loss_fn, optimizer, scheduler, n_epochs=5, log_interval=5)


if __name__ == "__main__":
    main()
