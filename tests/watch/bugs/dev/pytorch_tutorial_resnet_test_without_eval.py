"""A tutorial implementation of the CIFAR-10 residual network from the ResNet paper (section 4.2):
module-level script with a conv3x3 helper, a ResidualBlock with BatchNorm and an optional
downsample branch, a ResNet(block, layers) class built by make_layer, a random flip + crop training
transform and a plain to-tensor test transform, CrossEntropyLoss, Adam(lr=0.001), an inline loop
(zero_grad, forward, loss, backward, step) with a loss print every few iterations and a manual
learning-rate cut every few epochs, then a final test loop that reports the accuracy. The test loop
never calls resnet.eval(): BatchNorm normalizes each test batch with its own statistics (and keeps
updating its running averages) instead of using the running statistics, so the reported test
accuracy is not the accuracy of the trained model in inference mode.

Thread: https://github.com/yunjey/pytorch-tutorial/issues/62
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)


class FlipCrop:
    def __init__(self, size, pad, generator):
        self.size, self.pad, self.g = size, pad, generator

    def __call__(self, img):
        if torch.rand(1, generator=self.g).item() < 0.5:
            img = img.flip(-1)
        img = F.pad(img, [self.pad] * 4)
        i, j = torch.randint(0, 2 * self.pad + 1, (2,), generator=self.g).tolist()
        return img[:, i:i + self.size, j:j + self.size]


class Cifar10Like(Dataset):
    """Ten classes of textured colour patterns in [0, 1], 16x16."""

    def __init__(self, n, seed, transform=None, size=16):
        g = torch.Generator().manual_seed(seed)
        pg = torch.Generator().manual_seed(7)
        freqs = 1 + 3 * torch.rand(10, 2, generator=pg)
        colours = 0.2 + 0.6 * torch.rand(10, 3, 1, 1, generator=pg)
        self.labels = torch.randint(0, 10, (n,), generator=g)
        yy, xx = torch.meshgrid(torch.linspace(0, 3.14, size), torch.linspace(0, 3.14, size), indexing="ij")
        f = freqs[self.labels]
        pattern = 0.5 + 0.5 * torch.sin(f[:, 0, None, None] * yy + f[:, 1, None, None] * xx)
        self.images = (0.6 * pattern[:, None] * colours[self.labels]
                       + 0.4 * torch.rand(n, 3, size, size, generator=g))
        self.transform = transform

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        img = self.images[i]
        return (self.transform(img) if self.transform else img), self.labels[i]


train_dataset = Cifar10Like(1600, seed=1, transform=FlipCrop(16, 2, torch.Generator().manual_seed(2)))
test_dataset = Cifar10Like(500, seed=3)
train_loader = DataLoader(dataset=train_dataset, batch_size=100, shuffle=True,
                          generator=torch.Generator().manual_seed(4))
test_loader = DataLoader(dataset=test_dataset, batch_size=100, shuffle=False)


def conv3x3(in_channels, out_channels, stride=1):
    return nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=stride, padding=1, bias=False)


class ResidualBlock(nn.Module):
    def __init__(self, in_channels, out_channels, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv3x3(in_channels, out_channels, stride)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(out_channels, out_channels)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.downsample = downsample

    def forward(self, x):
        residual = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample:
            residual = self.downsample(x)
        return self.relu(out + residual)


class ResNet(nn.Module):
    def __init__(self, block, layers, num_classes=10):
        super().__init__()
        self.in_channels = 16
        self.conv = conv3x3(3, 16)
        self.bn = nn.BatchNorm2d(16)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = self.make_layer(block, 16, layers[0])
        self.layer2 = self.make_layer(block, 32, layers[1], 2)
        self.layer3 = self.make_layer(block, 64, layers[2], 2)
        self.avg_pool = nn.AvgPool2d(4)
        self.fc = nn.Linear(64, num_classes)

    def make_layer(self, block, out_channels, blocks, stride=1):
        downsample = None
        if stride != 1 or self.in_channels != out_channels:
            downsample = nn.Sequential(conv3x3(self.in_channels, out_channels, stride=stride),
                                       nn.BatchNorm2d(out_channels))
        layers = [block(self.in_channels, out_channels, stride, downsample)]
        self.in_channels = out_channels
        for _ in range(1, blocks):
            layers.append(block(out_channels, out_channels))
        return nn.Sequential(*layers)

    def forward(self, x):
        out = self.relu(self.bn(self.conv(x)))
        out = self.layer3(self.layer2(self.layer1(out)))
        out = self.avg_pool(out)
        return self.fc(out.view(out.size(0), -1))


resnet = ResNet(ResidualBlock, [1, 1, 1])
criterion = nn.CrossEntropyLoss()
lr = 0.001
optimizer = torch.optim.Adam(resnet.parameters(), lr=lr)

num_epochs = 4
for epoch in range(num_epochs):
    for i, (images, labels) in enumerate(train_loader):
        optimizer.zero_grad()
        outputs = resnet(images)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()
        if (i + 1) % 10 == 0:
            print("Epoch [%d/%d], Iter [%d/%d] Loss: %.4f"
                  % (epoch + 1, num_epochs, i + 1, len(train_loader), loss.item()))
    # Decaying learning rate
    if (epoch + 1) % 2 == 0:
        lr /= 3
        for group in optimizer.param_groups:
            group["lr"] = lr

# Test
correct = 0
total = 0
with torch.no_grad():
    for images, labels in test_loader:
        outputs = resnet(images)
        _, predicted = torch.max(outputs, 1)
        total += labels.size(0)
        correct += (predicted == labels).sum().item()
print("Accuracy of the model on the test images: %d %%" % (100 * correct / total))
