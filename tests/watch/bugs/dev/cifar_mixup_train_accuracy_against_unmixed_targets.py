"""A CIFAR-10 training script with an optional mixup flag: module-level setup (random crop + flip
and normalize for training, normalize only for testing), a small residual CNN, SGD(lr=0.1,
momentum=0.9, weight_decay=5e-4) with ReduceLROnPlateau on the test loss, and train(epoch) /
test(epoch) functions that keep running loss and accuracy. With mixup on, each batch goes through
mixup(inputs, targets, num_classes), which blends every image with a randomly paired one using a
per-sample Beta weight and returns the blended soft one-hot targets; the loss is a soft-target
cross-entropy on them. For the training accuracy, though, the script takes the original integer
targets back out of the batch and compares the predictions on the blended images with them, so
the reported training accuracy measures agreement with only one of the two mixed labels and is a
misleading number far below what the model does on training images.

Thread: https://github.com/tugstugi/pytorch-speech-commands/issues/5
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

CLASSES = ('plane', 'car', 'bird', 'cat', 'deer', 'dog', 'frog', 'horse', 'ship', 'truck')
MIXUP = True


class ToyCIFAR10(Dataset):
    def __init__(self, n, seed, train, size=16):
        g = torch.Generator().manual_seed(seed)
        pg = torch.Generator().manual_seed(21)
        protos = torch.rand(len(CLASSES), 3, size, size, generator=pg)
        protos = F.avg_pool2d(protos, 3, 1, 1)
        self.targets = torch.randint(0, len(CLASSES), (n,), generator=g)
        self.data = 0.7 * protos[self.targets] + 0.3 * torch.rand(n, 3, size, size, generator=g)
        self.mean = torch.tensor([0.45, 0.45, 0.45]).view(3, 1, 1)
        self.std = torch.tensor([0.2, 0.2, 0.2]).view(3, 1, 1)
        self.train = train
        self.g = torch.Generator().manual_seed(seed + 100)

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, i):
        img = self.data[i]
        if self.train:
            img = F.pad(img, [2] * 4)
            y, x = torch.randint(0, 5, (2,), generator=self.g).tolist()
            img = img[:, y:y + 16, x:x + 16]
            if torch.rand(1, generator=self.g).item() < 0.5:
                img = img.flip(-1)
        return (img - self.mean) / self.std, self.targets[i]


def onehot(targets, num_classes):
    return torch.zeros(targets.size(0), num_classes).scatter_(1, targets.view(-1, 1), 1.0)


rng = np.random.RandomState(0)


def mixup(inputs, targets, num_classes, alpha=2.0):
    s = inputs.size(0)
    weight = torch.from_numpy(rng.beta(alpha, alpha, s)).float()
    index = torch.from_numpy(rng.permutation(s))
    x1, x2 = inputs, inputs[index]
    y1, y2 = onehot(targets, num_classes), onehot(targets[index], num_classes)
    inputs = weight.view(s, 1, 1, 1) * x1 + (1 - weight.view(s, 1, 1, 1)) * x2
    targets = weight.view(s, 1) * y1 + (1 - weight.view(s, 1)) * y2
    return inputs, targets


def mixup_cross_entropy_loss(inputs, soft_targets):
    return torch.mean(torch.sum(-soft_targets * F.log_softmax(inputs, dim=1), dim=1))


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.sc = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        return F.relu(self.b2(self.c2(F.relu(self.b1(self.c1(x))))) + self.sc(x))


class SmallResNet(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.blocks = nn.Sequential(Block(16, 32, 2), Block(32, 32, 2))
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.fc(F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1).flatten(1))


torch.manual_seed(0)
train_dataloader = DataLoader(ToyCIFAR10(1280, 1, train=True), batch_size=64, shuffle=True,
                              generator=torch.Generator().manual_seed(2))
test_dataloader = DataLoader(ToyCIFAR10(400, 3, train=False), batch_size=100, shuffle=False)
model = SmallResNet(num_classes=len(CLASSES))
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
lr_scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=2, factor=0.1)


def train(epoch):
    model.train()
    running_loss, it, correct, total = 0.0, 0, 0, 0
    for batch in train_dataloader:
        inputs, targets = batch
        if MIXUP:
            inputs, targets = mixup(inputs, targets, num_classes=len(CLASSES))
        outputs = model(inputs)
        if MIXUP:
            loss = mixup_cross_entropy_loss(outputs, targets)
        else:
            loss = criterion(outputs, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        it += 1
        running_loss += loss.item()
        pred = outputs.detach().max(1, keepdim=True)[1]
        if MIXUP:
            _, targets = batch
        correct += pred.eq(targets.view_as(pred)).sum().item()
        total += targets.size(0)
    print("epoch %d train loss %.4f acc %.2f%%" % (epoch, running_loss / it, 100 * correct / total))


def test(epoch):
    model.eval()
    running_loss, it, correct, total = 0.0, 0, 0, 0
    with torch.no_grad():
        for inputs, targets in test_dataloader:
            outputs = model(inputs)
            running_loss += criterion(outputs, targets).item()
            it += 1
            correct += outputs.argmax(1).eq(targets).sum().item()
            total += targets.size(0)
    print("epoch %d test loss %.4f acc %.2f%%" % (epoch, running_loss / it, 100 * correct / total))
    return running_loss / it


for epoch in range(4):
    train(epoch)
    epoch_loss = test(epoch)
    lr_scheduler.step(epoch_loss)
print("finished")
