"""A semantic-segmentation Trainer in the pytorch-fcn style: Trainer(model, optimizer,
train_loader, val_loader, max_iter, interval_validate) with train() looping over epochs,
train_epoch() calling model.train() once at its start, and validate() triggered from inside the
batch loop whenever iteration % interval_validate == 0. validate() switches the model to eval()
and returns without switching it back, so after the first validation (at iteration 0, and then
mid-epoch) the FCN keeps training with its Dropout2d layers (drop6/drop7 of the FCN head)
turned off until the next epoch begins. Most optimizer steps run without the regularisation the
model was designed with, and nothing reports it.

Thread: https://github.com/wkentaro/pytorch-fcn/pull/56
"""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

N_CLASS = 4


def cross_entropy2d(score, target, size_average=False):
    loss = F.cross_entropy(score, target, ignore_index=-1, reduction="sum")
    if size_average:
        loss = loss / (target >= 0).sum()
    return loss


class FCN32s(nn.Module):
    def __init__(self, n_class=N_CLASS):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2))
        self.fc6 = nn.Conv2d(32, 64, 3, padding=1)
        self.drop6 = nn.Dropout2d(0.5)
        self.fc7 = nn.Conv2d(64, 64, 1)
        self.drop7 = nn.Dropout2d(0.5)
        self.score_fr = nn.Conv2d(64, n_class, 1)
        self.upscore = nn.ConvTranspose2d(n_class, n_class, 8, stride=4, padding=2, bias=False)

    def forward(self, x):
        h = self.features(x)
        h = self.drop6(F.relu(self.fc6(h)))
        h = self.drop7(F.relu(self.fc7(h)))
        return self.upscore(self.score_fr(h))


def mean_iu(label_trues, label_preds, n_class):
    hist = torch.zeros(n_class, n_class)
    for lt, lp in zip(label_trues, label_preds):
        hist += torch.bincount(n_class * lt.flatten() + lp.flatten(), minlength=n_class ** 2).view(n_class, n_class).float()
    iu = hist.diag() / (hist.sum(0) + hist.sum(1) - hist.diag()).clamp(min=1)
    return iu.mean().item()


class Trainer:
    def __init__(self, model, optimizer, train_loader, val_loader, max_iter, interval_validate=None):
        self.model = model
        self.optim = optimizer
        self.train_loader = train_loader
        self.val_loader = val_loader
        self.interval_validate = interval_validate or len(train_loader)
        self.epoch = 0
        self.iteration = 0
        self.max_iter = max_iter
        self.best_mean_iu = 0.0
        self.steps_in_eval_mode = 0

    def validate(self):
        self.model.eval()
        val_loss, trues, preds = 0.0, [], []
        with torch.no_grad():
            for data, target in self.val_loader:
                score = self.model(data)
                val_loss += cross_entropy2d(score, target).item() / len(data)
                trues.extend(target)
                preds.extend(score.argmax(1))
        miu = mean_iu(trues, preds, N_CLASS)
        self.best_mean_iu = max(self.best_mean_iu, miu)
        print(f"  valid iter {self.iteration:3d}  loss {val_loss / len(self.val_loader):8.1f}  mean IU {miu:.3f}")

    def train_epoch(self):
        self.model.train()
        for batch_idx, (data, target) in enumerate(self.train_loader):
            self.iteration = batch_idx + self.epoch * len(self.train_loader)
            if self.iteration % self.interval_validate == 0:
                self.validate()
            self.steps_in_eval_mode += int(not self.model.training)
            self.optim.zero_grad()
            score = self.model(data)
            loss = cross_entropy2d(score, target) / len(data)
            loss.backward()
            self.optim.step()
            if self.iteration >= self.max_iter:
                break

    def train(self):
        max_epoch = int(math.ceil(1.0 * self.max_iter / len(self.train_loader)))
        for epoch in range(self.epoch, max_epoch):
            self.epoch = epoch
            self.train_epoch()
            if self.iteration >= self.max_iter:
                break
        print(f"{self.steps_in_eval_mode} of {self.iteration + 1} optimizer steps ran with the model in eval mode")


def make_dataset(n, gen, size=32):
    imgs = torch.randn(n, 3, size, size, generator=gen) * 0.5
    labels = torch.zeros(n, size, size, dtype=torch.long)
    yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
    for i in range(n):
        for c in range(1, N_CLASS):
            cy, cx = torch.randint(4, size - 4, (2,), generator=gen)
            r = int(torch.randint(3, 8, (1,), generator=gen))
            m = (yy - cy) ** 2 + (xx - cx) ** 2 < r * r
            labels[i][m] = c
            imgs[i, c - 1][m] += 1.0
    return TensorDataset(imgs, labels)


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    train_loader = DataLoader(make_dataset(96, gen), batch_size=8, shuffle=True,
                              generator=torch.Generator().manual_seed(1))
    val_loader = DataLoader(make_dataset(32, gen), batch_size=16)
    model = FCN32s()
    optim = torch.optim.SGD(model.parameters(), lr=2e-4, momentum=0.99)
    trainer = Trainer(model, optim, train_loader, val_loader, max_iter=120, interval_validate=20)
    trainer.train()


if __name__ == "__main__":
    main()
