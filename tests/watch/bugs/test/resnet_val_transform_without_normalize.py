"""A ResNet image-classification project whose main() builds one transform pipeline for the
training set (to float, then Normalize with the dataset mean and std) and a separate one for the
validation/test sets that only converts to float, without the Normalize step. train_epoch() and
valid_epoch() helpers drive the model: training accuracy climbs while validation accuracy, computed
on unnormalised 0-255 inputs, stays far below it.

Thread: https://github.com/JeasunLok/ResNet-pytorch/issues/1
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


class ToFloat:
    def __call__(self, img):
        return img.float()


class Normalize:
    def __init__(self, mean, std):
        self.mean = torch.tensor(mean)[:, None, None]
        self.std = torch.tensor(std)[:, None, None]

    def __call__(self, img):
        return (img - self.mean) / self.std


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class ImageListDataset(Dataset):
    def __init__(self, images, labels, transform):
        self.images, self.labels, self.transform = images, labels, transform

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        return self.transform(self.images[idx]), self.labels[idx]


class BasicBlock(nn.Module):
    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, num_classes=5):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.layer1 = BasicBlock(16, 16)
        self.layer2 = BasicBlock(16, 32, stride=2)
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def train_epoch(model, loader, criterion, optimizer):
    model.train()
    correct = total = 0
    for images, labels in loader:
        outputs = model(images)
        loss = criterion(outputs, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        correct += (outputs.argmax(1) == labels).sum().item()
        total += labels.numel()
    return loss.item(), correct / total


def valid_epoch(model, loader, criterion):
    model.eval()
    correct = total = 0
    loss_sum = 0.0
    with torch.no_grad():
        for images, labels in loader:
            outputs = model(images)
            loss_sum += criterion(outputs, labels).item() * labels.numel()
            correct += (outputs.argmax(1) == labels).sum().item()
            total += labels.numel()
    return loss_sum / total, correct / total


def scene_images(n, seed, num_classes=5):
    """uint8-range RGB images: each class has its own mean colour and a coarse pattern."""
    g = torch.Generator().manual_seed(seed)
    colours = torch.tensor([[200, 60, 60], [60, 200, 60], [60, 60, 200], [180, 180, 60], [120, 120, 120]]).float()
    pattern = torch.randn(num_classes, 1, 16, 16, generator=torch.Generator().manual_seed(4)) * 25
    y = torch.randint(0, num_classes, (n,), generator=g)
    imgs = colours[y][:, :, None, None] + pattern[y] + 50 * torch.randn(n, 3, 16, 16, generator=g)
    return imgs.clamp(0, 255).round().to(torch.uint8), y


def main():
    torch.manual_seed(0)
    mean, std = [130.0, 130.0, 120.0], [70.0, 70.0, 70.0]
    transform_train = Compose([ToFloat(), Normalize(mean, std)])
    transform_test = Compose([ToFloat()])
    train_set = ImageListDataset(*scene_images(1200, 0), transform_train)
    val_set = ImageListDataset(*scene_images(400, 1), transform_test)
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(0))
    val_loader = DataLoader(val_set, batch_size=200)
    model = ResNet()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    for epoch in range(4):
        train_loss, train_acc = train_epoch(model, train_loader, criterion, optimizer)
        val_loss, val_acc = valid_epoch(model, val_loader, criterion)
        print(f"Epoch {epoch + 1}: train loss {train_loss:.4f} train acc {train_acc:.3f} | "
              f"val loss {val_loss:.4f} val acc {val_acc:.3f}")


if __name__ == "__main__":
    main()
