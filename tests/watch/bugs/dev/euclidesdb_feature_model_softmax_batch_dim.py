"""Example models of an embedding database: a ResNet subclass ResnetFeature overrides forward() to run
the backbone, keep the pooled features as the embedding, apply the fc layer and return
(F.softmax(x, dim=0), features); the module is exported with torch.jit.trace and the database calls it
on batches of images to store each image's embedding next to its predicted class and score. Here the
classifier is first fine-tuned on the target images with Adam and CrossEntropyLoss over a DataLoader,
then wrapped, traced and queried. The exported softmax uses dim=0, the batch axis of the (batch, classes)
output, so the stored "probabilities" of one image depend on the other images in the same call: an
image queried alone gets probability 1 for every class and is labelled class 0, and in a batch the
scores shrink with the batch size and the predicted class moves with the batch composition.

Thread: https://github.com/perone/euclidesdb/issues/2
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class BasicBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(out)))


class ResNet(nn.Module):
    def __init__(self, num_classes=5, width=16):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.layer1 = BasicBlock(width)
        self.layer2 = BasicBlock(width)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(width, num_classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        return self.fc(self.avgpool(x).flatten(1))


class ResnetFeature(ResNet):
    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        x_feat = self.avgpool(x).view(x.size(0), -1)
        x = self.fc(x_feat)
        x = F.softmax(x, dim=0)
        return x, x_feat


def make_images(n, seed):
    g = torch.Generator().manual_seed(seed)
    colors = torch.randn(5, 3, 1, 1, generator=torch.Generator().manual_seed(2))
    y = torch.randint(0, 5, (n,), generator=g)
    return colors[y] + 0.8 * torch.randn(n, 3, 12, 12, generator=g), y


def main():
    torch.manual_seed(0)
    x, y = make_images(1024, seed=0)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(0))
    model = ResNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    criterion = nn.CrossEntropyLoss()
    step = 0
    for epoch in range(3):
        model.train()
        for images, labels in loader:
            optimizer.zero_grad()
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()
            step += 1
            if step % 16 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}")

    feature_model = ResnetFeature()
    feature_model.load_state_dict(model.state_dict())
    feature_model.eval()
    x_q, y_q = make_images(96, seed=1)
    traced = torch.jit.trace(feature_model, x_q[:8])
    with torch.no_grad():
        # the database indexes images in calls of different sizes
        for batch_size in (1, 8, 32):
            preds, scores = [], []
            for i in range(0, len(x_q), batch_size):
                probs, _ = traced(x_q[i:i + batch_size])
                top, cls = probs.max(dim=1)
                preds.append(cls)
                scores.append(top)
            preds, scores = torch.cat(preds), torch.cat(scores)
            acc = (preds == y_q).float().mean().item()
            print(f"indexed in calls of {batch_size:2d}: stored-class accuracy {acc:.3f}, "
                  f"mean stored score {scores.mean().item():.3f}")


if __name__ == "__main__":
    main()
