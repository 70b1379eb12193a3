"""A face-recognition training loop that walks the dataset with a sample counter and takes each batch
as next(iter(loader)) inside the while loop; the loader does not shuffle, so every step restarts
the epoch and trains on the same first batch.

Thread: https://github.com/ZhaoJ9014/face.evoLVe/pull/39
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Backbone(nn.Module):
    def __init__(self, embedding_size=32):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.PReLU(16),
                                  nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.PReLU(32),
                                  nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, embedding_size))

    def forward(self, x):
        return self.body(x)


class ArcFace(nn.Module):
    def __init__(self, in_features, out_features, s=16.0, m=0.3):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features) * 0.01)
        self.s, self.m = s, m

    def forward(self, embeddings, label):
        cosine = F.linear(F.normalize(embeddings), F.normalize(self.weight))
        onehot = F.one_hot(label, cosine.size(1)).float()
        return self.s * (cosine - self.m * onehot)


def train(backbone, head, loader, optimizer, epochs, batch_size):
    criterion = nn.CrossEntropyLoss()
    batch = 0
    for epoch in range(epochs):
        backbone.train()
        head.train()
        idx = 0
        while idx + batch_size <= len(loader.dataset):
            inputs, labels = next(iter(loader))
            features = backbone(inputs)
            outputs = head(features, labels)
            loss = criterion(outputs, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            idx += batch_size
            batch += 1
        print(f"epoch {epoch} batch {batch} loss {loss.item():.4f}")


def faces(n=1024, ids=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(ids, 3, 16, 16, generator=g)
    y = torch.randint(0, ids, (n,), generator=g)
    return TensorDataset(protos[y] + 0.8 * torch.randn(n, 3, 16, 16, generator=g), y)


def main():
    torch.manual_seed(0)
    batch_size = 32
    loader = DataLoader(faces(), batch_size=batch_size, pin_memory=False, drop_last=True)
    backbone, head = Backbone(), ArcFace(32, 32)
    optimizer = torch.optim.SGD([{"params": backbone.parameters(), "weight_decay": 5e-4},
                                 {"params": head.parameters(), "weight_decay": 5e-4}], lr=0.05, momentum=0.9)
    train(backbone, head, loader, optimizer, epochs=3, batch_size=batch_size)


if __name__ == "__main__":
    main()
