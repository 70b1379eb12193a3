"""A small CNN with BatchNorm trained by a plain epoch/batch loop, then tested one image at a time by a
predict_one(model, image) helper that never calls model.eval(): each test image is normalized by
its own batch-of-one statistics instead of the running statistics, so the reported test accuracy
is wrong (and every test image also overwrites the running buffers).

Thread: https://discuss.pytorch.org/t/what-does-model-eval-do-for-batchnorm-layer/7146
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class SmallBNNet(nn.Module):
    def __init__(self, num_classes=4):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Linear(16 * 4 * 4, num_classes)

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


def make_images(n, seed):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 4, (n,), generator=g)
    # class k has brightness offset k: the absolute level matters, which batch-of-one
    # normalization throws away
    x = 0.8 * torch.randn(n, 1, 16, 16, generator=g) + y.view(-1, 1, 1, 1).float()
    return x, y


def predict_one(model, image):
    with torch.no_grad():
        return model(image.unsqueeze(0)).argmax(1).item()


def main():
    torch.manual_seed(0)
    x_train, y_train = make_images(1536, 0)
    x_test, y_test = make_images(200, 1)
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=32, shuffle=True,
                        generator=torch.Generator().manual_seed(0))
    model = SmallBNNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(2):
        model.train()
        for images, labels in loader:
            optimizer.zero_grad()
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} last batch loss {loss.item():.4f}")
    correct = sum(int(predict_one(model, img) == int(lbl)) for img, lbl in zip(x_test, y_test))
    print(f"test accuracy (one image at a time) {correct / len(y_test):.3f}")


if __name__ == "__main__":
    main()
