"""A CIFAR-10 training script in the style of the popular "train CIFAR10 with PyTorch" repository:
module-level transform_train / transform_test pipelines, a ResNet18-style network of BasicBlocks,
CrossEntropyLoss, SGD(lr=0.1, momentum=0.9, weight_decay=5e-4), and two global-state functions
train(epoch) and test(epoch) called once per epoch; test() switches to net.eval(), runs under
no_grad, prints the running accuracy and keeps best_acc. The test pipeline was written as a copy
of the training one, so transform_test also does the random crop with padding and the random
horizontal flip: every test pass scores a different random view of each test image, and the same
weights give a different, lower test accuracy each time.

Thread: https://github.com/kuangliu/pytorch-cifar/pull/6
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

NUM_CLASSES = 10


class RandomCrop:
    def __init__(self, size, padding, generator):
        self.size, self.padding, self.g = size, padding, generator

    def __call__(self, img):
        img = F.pad(img, [self.padding] * 4)
        i, j = torch.randint(0, 2 * self.padding + 1, (2,), generator=self.g).tolist()
        return img[:, i:i + self.size, j:j + self.size]


class RandomHorizontalFlip:
    def __init__(self, generator):
        self.g = generator

    def __call__(self, img):
        return img.flip(-1) if torch.rand(1, generator=self.g).item() < 0.5 else img


class Normalize:
    def __init__(self, mean, std):
        self.mean = torch.tensor(mean).view(-1, 1, 1)
        self.std = torch.tensor(std).view(-1, 1, 1)

    def __call__(self, img):
        return (img - self.mean) / self.std


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class SyntheticCIFAR10(Dataset):
    """[0, 1] images whose class is a coloured blob at a class-dependent, off-centre position."""

    def __init__(self, n, seed, transform, size=16):
        g = torch.Generator().manual_seed(seed)
        self.targets = torch.randint(0, NUM_CLASSES, (n,), generator=g)
        yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
        cg = torch.Generator().manual_seed(99)
        centres = 3 + (size - 6) * torch.rand(NUM_CLASSES, 2, generator=cg)
        colours = torch.rand(NUM_CLASSES, 3, 1, 1, generator=cg)
        c = centres[self.targets]
        blob = torch.exp(-((yy - c[:, 0, None, None]) ** 2 + (xx - c[:, 1, None, None]) ** 2) / 6.0)
        self.data = (0.5 * blob[:, None] * colours[self.targets] + 0.5 * torch.rand(n, 3, size, size, generator=g))
        self.transform = transform

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, i):
        return self.transform(self.data[i]), self.targets[i]


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False),
                                          nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, block, num_blocks, num_classes=NUM_CLASSES):
        super().__init__()
        self.in_planes = 16
        self.conv1 = nn.Conv2d(3, 16, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.layer1 = self._make_layer(block, 16, num_blocks[0], 1)
        self.layer2 = self._make_layer(block, 32, num_blocks[1], 2)
        self.linear = nn.Linear(32 * block.expansion, num_classes)

    def _make_layer(self, block, planes, num_blocks, stride):
        layers = []
        for s in [stride] + [1] * (num_blocks - 1):
            layers.append(block(self.in_planes, planes, s))
            self.in_planes = planes * block.expansion
        return nn.Sequential(*layers)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer2(self.layer1(out))
        out = F.adaptive_avg_pool2d(out, 1).flatten(1)
        return self.linear(out)


torch.manual_seed(0)
aug_gen = torch.Generator().manual_seed(1)
best_acc = 0

print('==> Preparing data..')
transform_train = Compose([
    RandomCrop(16, padding=2, generator=aug_gen),
    RandomHorizontalFlip(aug_gen),
    Normalize((0.49, 0.48, 0.45), (0.25, 0.24, 0.26)),
])
transform_test = Compose([
    RandomCrop(16, padding=2, generator=aug_gen),
    RandomHorizontalFlip(aug_gen),
    Normalize((0.49, 0.48, 0.45), (0.25, 0.24, 0.26)),
])
trainset = SyntheticCIFAR10(1280, seed=2, transform=transform_train)
trainloader = DataLoader(trainset, batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(3))
testset = SyntheticCIFAR10(400, seed=4, transform=transform_test)
testloader = DataLoader(testset, batch_size=100, shuffle=False)

print('==> Building model..')
net = ResNet(BasicBlock, [1, 1])
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)


def train(epoch):
    print('\nEpoch: %d' % epoch)
    net.train()
    train_loss, correct, total = 0, 0, 0
    for batch_idx, (inputs, targets) in enumerate(trainloader):
        optimizer.zero_grad()
        outputs = net(inputs)
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()
        train_loss += loss.item()
        _, predicted = outputs.max(1)
        total += targets.size(0)
        correct += predicted.eq(targets).sum().item()
    print('train Loss: %.3f | Acc: %.3f%%' % (train_loss / (batch_idx + 1), 100. * correct / total))


def test(epoch):
    global best_acc
    net.eval()
    test_loss, correct, total = 0, 0, 0
    with torch.no_grad():
        for batch_idx, (inputs, targets) in enumerate(testloader):
            outputs = net(inputs)
            loss = criterion(outputs, targets)
            test_loss += loss.item()
            _, predicted = outputs.max(1)
            total += targets.size(0)
            correct += predicted.eq(targets).sum().item()
    acc = 100. * correct / total
    print('test Loss: %.3f | Acc: %.3f%%' % (test_loss / (batch_idx + 1), acc))
    if acc > best_acc:
        best_acc = acc


for epoch in range(4):
    train(epoch)
    test(epoch)
print('best test acc %.2f' % best_acc)
