"""A from-scratch residual network (BottleNeck blocks with BatchNorm and LeakyReLU, expansion 2) for
a 100-class CIFAR-style dataset, trained by a plain notebook loop: train and test transform
pipelines (random crop with padding and horizontal flip for training, then to-tensor scaling to
[0, 1] and Normalize), CrossEntropyLoss, Adam(lr=1e-3), zero_grad/backward/step per batch with a
running loss printed every few batches, and a final test_label_predictions(model, device, loader)
helper under model.eval(). (The notebook's per-epoch accuracy passes are left out.) The Normalize
mean and std were written as [x / 255.0 for x in ...] although the pixels are already in [0, 1]
after the to-tensor step, so every input value becomes (x - 0.002) / 0.001: the network is fed
values in the hundreds instead of unit-scale inputs.

Thread: https://github.com/batuhan3526/ResNet50_on_Cifar_100_Without_Transfer_Learning/issues/1
"""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

NUM_CLASSES = 100


class Normalize:
    def __init__(self, mean, std):
        self.mean = torch.tensor(mean).view(-1, 1, 1)
        self.std = torch.tensor(std).view(-1, 1, 1)

    def __call__(self, img):
        return (img - self.mean) / self.std


class RandomCropFlip:
    def __init__(self, size, padding, generator):
        self.size, self.padding, self.g = size, padding, generator

    def __call__(self, img):
        img = nn.functional.pad(img, [self.padding] * 4)
        i, j = torch.randint(0, 2 * self.padding + 1, (2,), generator=self.g).tolist()
        img = img[:, i:i + self.size, j:j + self.size]
        if torch.rand(1, generator=self.g).item() < 0.5:
            img = img.flip(-1)
        return img


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class SyntheticCifar100(Dataset):
    """uint8-range images scaled to [0, 1] (the to-tensor step), class-dependent colour blobs."""

    def __init__(self, n, seed, transform, size=16):
        g = torch.Generator().manual_seed(seed)
        protos = torch.rand(NUM_CLASSES, 3, size, size, generator=torch.Generator().manual_seed(5))
        self.labels = torch.randint(0, NUM_CLASSES, (n,), generator=g)
        raw = 0.6 * protos[self.labels] + 0.4 * torch.rand(n, 3, size, size, generator=g)
        self.images = (raw * 255).round() / 255.0
        self.transform = transform

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.transform(self.images[i]), self.labels[i]


class BottleNeck(nn.Module):
    expansion = 2

    def __init__(self, in_channels, out_channels, stride=1):
        super().__init__()
        self.residual_function = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, kernel_size=1, bias=False),
            nn.BatchNorm2d(out_channels), nn.LeakyReLU(inplace=True),
            nn.Conv2d(out_channels, out_channels, stride=stride, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels), nn.LeakyReLU(inplace=True),
            nn.Conv2d(out_channels, out_channels * BottleNeck.expansion, kernel_size=1, bias=False),
            nn.BatchNorm2d(out_channels * BottleNeck.expansion))
        self.shortcut = nn.Sequential()
        if stride != 1 or in_channels != out_channels * BottleNeck.expansion:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels * BottleNeck.expansion, stride=stride, kernel_size=1,
                          bias=False),
                nn.BatchNorm2d(out_channels * BottleNeck.expansion))

    def forward(self, x):
        return nn.LeakyReLU(inplace=True)(self.residual_function(x) + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, block, num_block, num_classes=NUM_CLASSES):
        super().__init__()
        self.in_channels = 16
        self.conv1 = nn.Sequential(nn.Conv2d(3, 16, kernel_size=3, padding=1, bias=False),
                                   nn.BatchNorm2d(16), nn.LeakyReLU(inplace=True))
        self.conv2_x = self._make_layer(block, 16, num_block[0], 1)
        self.conv3_x = self._make_layer(block, 32, num_block[1], 2)
        self.avg_pool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(32 * block.expansion, num_classes)

    def _make_layer(self, block, out_channels, num_blocks, stride):
        layers = []
        for s in [stride] + [1] * (num_blocks - 1):
            layers.append(block(self.in_channels, out_channels, s))
            self.in_channels = out_channels * block.expansion
        return nn.Sequential(*layers)

    def forward(self, x):
        output = self.conv3_x(self.conv2_x(self.conv1(x)))
        return self.fc(self.avg_pool(output).flatten(1))


def test_label_predictions(model, device, test_loader):
    model.eval()
    actuals, predictions = [], []
    with torch.no_grad():
        for data, target in test_loader:
            output = model(data.to(device))
            prediction = output.argmax(dim=1, keepdim=True)
            actuals.extend(target.view_as(prediction))
            predictions.extend(prediction)
    return [i.item() for i in actuals], [i.item() for i in predictions]


def main():
    torch.manual_seed(0)
    transform_train = Compose([
        RandomCropFlip(16, padding=2, generator=torch.Generator().manual_seed(3)),
        Normalize(mean=[x / 255.0 for x in [0.507, 0.487, 0.441]],
                  std=[x / 255.0 for x in [0.267, 0.256, 0.276]])])
    transform_test = Compose([
        Normalize(mean=[x / 255.0 for x in [0.507, 0.487, 0.441]],
                  std=[x / 255.0 for x in [0.267, 0.256, 0.276]])])

    learning_rate = 0.001
    num_epochs = 4
    trainloader = DataLoader(SyntheticCifar100(1280, 1, transform_train), batch_size=64, shuffle=True,
                             generator=torch.Generator().manual_seed(0))
    testloader = DataLoader(SyntheticCifar100(512, 2, transform_test), batch_size=64, shuffle=False)
    device = torch.device("cpu")

    model = ResNet(BottleNeck, [1, 1]).to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)

    running_loss = 0.0
    for epoch in range(num_epochs):
        for i, (images, labels) in enumerate(trainloader):
            images, labels = images.to(device), labels.to(device)
            outputs = model(images)
            loss = criterion(outputs, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
            if i % 10 == 9:
                print("[%d, %5d] loss: %.3f" % (epoch + 1, i + 1, running_loss / 10))
                running_loss = 0.0

    actuals, predictions = test_label_predictions(model, device, testloader)
    acc = sum(int(a == p) for a, p in zip(actuals, predictions)) / len(actuals)
    print(f"Accuracy score: {acc:.3f}")


if __name__ == "__main__":
    main()
