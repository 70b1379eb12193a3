"""A DenseNet CIFAR demo: demo() builds the training set with the augmenting transform (random crop
with padding, random horizontal flip, normalize), and train(model, train_set, test_set, ...) carves
the validation set out of that same dataset with two SubsetRandomSamplers over a random permutation
of the indices. train_epoch()/test_epoch() helpers keep running averages; SGD with nesterov
momentum and a MultiStepLR; the best model is kept by validation error. Because the validation
loader reads the augmenting dataset, every validation image is randomly cropped and flipped, so the
validation error that picks the best model is noisy and biased upward.

Thread: https://github.com/gpleiss/efficient_densenet_pytorch/issues/51
"""
import copy

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.sampler import SubsetRandomSampler


class AverageMeter:
    def __init__(self):
        self.sum, self.count, self.avg = 0.0, 0, 0.0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


class RandomCropFlip:
    def __init__(self, padding=4):
        self.padding = padding

    def __call__(self, img):
        size = img.shape[-1]
        padded = F.pad(img, (self.padding,) * 4)
        i, j = torch.randint(0, 2 * self.padding + 1, (2,)).tolist()
        img = padded[:, i:i + size, j:j + size]
        if torch.rand(()) < 0.5:
            img = img.flip(-1)
        return img


class Normalize:
    def __init__(self, mean, std):
        self.mean, self.std = torch.tensor(mean).view(-1, 1, 1), torch.tensor(std).view(-1, 1, 1)

    def __call__(self, img):
        return (img - self.mean) / self.std


class Compose:
    def __init__(self, fns):
        self.fns = fns

    def __call__(self, img):
        for fn in self.fns:
            img = fn(img)
        return img


class TinyCIFAR(Dataset):
    def __init__(self, n, seed, transform):
        g = torch.Generator().manual_seed(seed)
        protos = torch.rand(10, 3, 16, 16, generator=torch.Generator().manual_seed(7))
        self.targets = torch.randint(0, 10, (n,), generator=g)
        shift = torch.randint(-2, 3, (n, 2), generator=g)
        imgs = protos[self.targets]
        self.data = torch.stack([im.roll(tuple(s.tolist()), dims=(1, 2)) for im, s in zip(imgs, shift)])
        self.data = (self.data + 0.35 * torch.randn(self.data.shape, generator=g)).clamp(0, 1)
        self.transform = transform

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, idx):
        return self.transform(self.data[idx]), self.targets[idx]


class DenseLayer(nn.Module):
    def __init__(self, in_ch, growth):
        super().__init__()
        self.bn, self.conv = nn.BatchNorm2d(in_ch), nn.Conv2d(in_ch, growth, 3, padding=1, bias=False)

    def forward(self, x):
        return torch.cat([x, self.conv(F.relu(self.bn(x)))], 1)


class DenseNet(nn.Module):
    def __init__(self, growth_rate=8, layers=3, num_classes=10):
        super().__init__()
        ch = 2 * growth_rate
        blocks = [nn.Conv2d(3, ch, 3, padding=1, bias=False)]
        for _ in range(layers):
            blocks.append(DenseLayer(ch, growth_rate))
            ch += growth_rate
        self.features = nn.Sequential(*blocks, nn.BatchNorm2d(ch), nn.ReLU())
        self.classifier = nn.Linear(ch, num_classes)

    def forward(self, x):
        return self.classifier(F.adaptive_avg_pool2d(self.features(x), 1).flatten(1))


def train_epoch(model, loader, optimizer):
    losses, error = AverageMeter(), AverageMeter()
    model.train()
    for input, target in loader:
        output = model(input)
        loss = F.cross_entropy(output, target)
        error.update((output.argmax(1) != target).float().mean().item(), target.size(0))
        losses.update(loss.item(), target.size(0))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return losses.avg, error.avg


def test_epoch(model, loader):
    losses, error = AverageMeter(), AverageMeter()
    model.eval()
    with torch.no_grad():
        for input, target in loader:
            output = model(input)
            losses.update(F.cross_entropy(output, target).item(), target.size(0))
            error.update((output.argmax(1) != target).float().mean().item(), target.size(0))
    return losses.avg, error.avg


def train(model, train_set, test_set, n_epochs=6, valid_size=256, batch_size=32, lr=0.1, wd=1e-4,
          momentum=0.9):
    indices = torch.randperm(len(train_set))
    train_sampler = SubsetRandomSampler(indices[:len(indices) - valid_size])
    valid_sampler = SubsetRandomSampler(indices[len(indices) - valid_size:])
    train_loader = DataLoader(train_set, batch_size=batch_size, sampler=train_sampler)
    valid_loader = DataLoader(train_set, batch_size=batch_size, sampler=valid_sampler)
    test_loader = DataLoader(test_set, batch_size=batch_size, shuffle=False)

    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, nesterov=True, weight_decay=wd)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[0.5 * n_epochs, 0.75 * n_epochs],
                                                     gamma=0.1)
    best_error, best_state = 1.0, None
    for epoch in range(n_epochs):
        train_loss, train_error = train_epoch(model, train_loader, optimizer)
        scheduler.step()
        valid_loss, valid_error = test_epoch(model, valid_loader)
        print(f"epoch {epoch + 1} train loss {train_loss:.4f} err {train_error:.4f} "
              f"valid loss {valid_loss:.4f} err {valid_error:.4f}")
        if valid_error < best_error:
            best_error, best_state = valid_error, copy.deepcopy(model.state_dict())
            print(f"New best error: {best_error:.4f}")
    model.load_state_dict(best_state)
    _, test_error = test_epoch(model, test_loader)
    print(f"Final test error: {test_error:.4f}")


def demo(seed=0):
    torch.manual_seed(seed)
    mean, std = [0.5, 0.5, 0.5], [0.3, 0.3, 0.3]
    train_transforms = Compose([RandomCropFlip(padding=4), Normalize(mean, std)])
    test_transforms = Compose([Normalize(mean, std)])
    train_set = TinyCIFAR(1280, seed=1, transform=train_transforms)
    test_set = TinyCIFAR(512, seed=2, transform=test_transforms)
    train(DenseNet(), train_set, test_set)


if __name__ == "__main__":
    demo()
