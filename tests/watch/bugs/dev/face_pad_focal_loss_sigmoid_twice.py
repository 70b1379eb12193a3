"""A face presentation-attack detector (bona fide vs attack images) trained by a main() loop: the
network returns a one-unit classification output and a low-resolution pixel map; the loss is a
weighted focal loss on the classification output plus a SmoothL1 loss between the predicted and the
target pixel map (weighted 1 for the first epochs, then 100); SGD with nesterov momentum and weight
decay, ExponentialLR stepped once per epoch, model.zero_grad() before each forward, and a validation
pass in eval mode that averages the frame scores of each video and scores them at a threshold (the
original wraps the training step in CUDA autocast / GradScaler, left out here on the CPU). The
classification head ends in torch.sigmoid while the focal loss is computed with
F.binary_cross_entropy_with_logits, which applies a sigmoid again: the loss sees sigmoid(sigmoid(z)),
squeezed into [0.5, 0.73], so it can never be small and its gradient is damped.

Thread: https://github.com/meilfang/LMFD-PAD/pull/1
"""
from collections import defaultdict

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class WeightedFocalLoss(nn.Module):
    def __init__(self, alpha=0.25, gamma=2):
        super().__init__()
        self.alpha = torch.tensor([alpha, 1 - alpha])
        self.gamma = gamma

    def forward(self, inputs, targets):
        bce_loss = F.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
        targets = targets.type(torch.long)
        at = self.alpha.gather(0, targets.view(-1))
        pt = torch.exp(-bce_loss)
        return (at * (1 - pt) ** self.gamma * bce_loss).mean()


class PADNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2))
        self.map_head = nn.Conv2d(32, 1, 1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.bn = nn.BatchNorm1d(32)
        self.drop = nn.Dropout(0.5)
        self.cls = nn.Linear(32, 1)

    def forward(self, x):
        feat = self.backbone(x)
        map_x = torch.sigmoid(self.map_head(feat)).squeeze(1)
        x = self.pool(feat).flatten(1)
        x = self.bn(x)
        x = self.drop(x)
        x = self.cls(x)
        x = torch.sigmoid(x)
        return x, map_x


class FaceFrames(Dataset):
    """Frames of short videos; bona fide (label 1) frames carry a faint texture pattern."""

    def __init__(self, n_videos, frames, seed, train=True):
        g = torch.Generator().manual_seed(seed)
        pattern = torch.randn(3, 16, 16, generator=torch.Generator().manual_seed(99))
        labels = torch.randint(0, 2, (n_videos,), generator=g)
        self.images, self.labels, self.videos = [], [], []
        for v in range(n_videos):
            base = torch.randn(3, 16, 16, generator=g)
            for _ in range(frames):
                img = base + 0.7 * torch.randn(3, 16, 16, generator=g) + 0.6 * labels[v] * pattern
                self.images.append(img)
                self.labels.append(labels[v])
                self.videos.append(f"video_{seed}_{v}")
        self.train = train

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        label = self.labels[i]
        map_x = torch.full((4, 4), float(label))
        if self.train:
            return self.images[i], label, map_x
        return self.images[i], label, map_x, self.videos[i]


def compute_video_score(video_ids, predictions, labels):
    scores, truth = defaultdict(list), {}
    for vid, p, y in zip(video_ids, predictions, labels):
        scores[vid].append(float(p))
        truth[vid] = int(y)
    vids = sorted(scores)
    return [sum(scores[v]) / len(scores[v]) for v in vids], [truth[v] for v in vids]


def main():
    torch.manual_seed(0)
    train_loader = DataLoader(FaceFrames(128, 4, seed=1), batch_size=32, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    val_loader = DataLoader(FaceFrames(40, 4, seed=2, train=False), batch_size=32, shuffle=False)
    model = PADNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, nesterov=True, weight_decay=0.0001)
    smoothl1_criterion = nn.SmoothL1Loss()
    fl_criterion = WeightedFocalLoss(alpha=0.5, gamma=2)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.999)

    for epoch in range(1, 7):
        model.train()
        w1 = 100 if epoch >= 5 else 1
        for images, labels, map_x in train_loader:
            model.zero_grad()
            pred, map_y = model(images)
            pred = torch.squeeze(pred)
            loss_1 = fl_criterion(pred.float(), labels.float())
            loss_2 = smoothl1_criterion(map_y, map_x) * w1
            loss = loss_1 + loss_2
            loss.backward()
            optimizer.step()

        model.eval()
        predictions, gt_labels, video_ids = [], [], []
        with torch.no_grad():
            for images, labels, _, video_id in val_loader:
                optimizer.zero_grad()
                pred, _ = model(images)
                for j in range(images.shape[0]):
                    predictions.append(pred[j].item())
                    gt_labels.append(labels[j].item())
                    video_ids.append(video_id[j])
        scores, truth = compute_video_score(video_ids, predictions, gt_labels)
        acc = sum(int((s > 0.5) == bool(t)) for s, t in zip(scores, truth)) / len(truth)
        scheduler.step()
        print(f"epoch {epoch} focal {loss_1.item():.4f} map {loss_2.item():.4f} val video acc {acc:.3f}")


if __name__ == "__main__":
    main()
