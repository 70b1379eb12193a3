"""A face-embedding trainer: a FaceEmbeddingModel class holds a backbone, an ArcFaceHeader (a
subclass of a generic ArcMarginHeader computing s * cos(m1 * theta + m2) - m3 for the target
class) and a cross-entropy loss; the optimizer is built by the caller from two parameter groups,
backbone and header, and passed to fit(train_dataset, batch_size, optimizer, max_epochs, ...),
which loops over a shuffled DataLoader with zero_grad/backward/step and runs a verification
evaluator on backbone embeddings after each epoch. The header's forward() normalises its class
centres by assigning self.linear.weight = nn.Parameter(normalize(self.linear.weight)) on every
call, so after the first batch the layer holds a fresh Parameter that is not the tensor the
optimizer was given: the class centres receive a gradient at every step and never move. The same
forward also clamps theta = acos(cos).clamp(-1, 1) (an angle, clamped to one radian), as in the
reported code. Nothing raises.

Thread: https://github.com/jonasgrebe/pt-femb-face-embeddings/issues/3
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class ArcMarginHeader(nn.Module):
    def __init__(self, in_features, out_features, s, m1=1.0, m2=0.0, m3=0.0):
        super().__init__()
        self.s, self.m1, self.m2, self.m3 = s, m1, m2, m3
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.normalize = F.normalize
        self.epsilon = 1e-6

    def forward(self, features, labels):
        self.linear.weight = nn.Parameter(self.normalize(self.linear.weight))
        cos = self.linear(self.normalize(features)).clamp(-1 + self.epsilon, 1 - self.epsilon)
        theta = torch.acos(cos).clamp(-1, 1)
        target = torch.cos(self.m1 * theta + self.m2) - self.m3
        one_hot = F.one_hot(labels, cos.shape[1]).float()
        return self.s * (one_hot * target + (1.0 - one_hot) * cos)


class ArcFaceHeader(ArcMarginHeader):
    def __init__(self, in_features, out_features, s=64.0, m=0.5):
        super().__init__(in_features, out_features, s=s, m2=m)


class Backbone(nn.Module):
    def __init__(self, embedding_size=32):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.PReLU(16), nn.MaxPool2d(2),
                                      nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.PReLU(32), nn.MaxPool2d(2))
        self.fc = nn.Linear(32 * 4 * 4, embedding_size)
        self.bn = nn.BatchNorm1d(embedding_size)

    def forward(self, x):
        return self.bn(self.fc(self.features(x).flatten(1)))


class VerificationEvaluator:
    def __init__(self, images, identities):
        self.images, self.identities = images, identities

    def __call__(self, features):
        features = F.normalize(features, dim=1)
        sim = features @ features.T
        same = self.identities[:, None] == self.identities[None, :]
        upper = torch.triu(torch.ones_like(same), diagonal=1)
        pos, neg = sim[same & upper], sim[~same & upper]
        best = max(((pos > t).float().sum() + (neg <= t).float().sum()).item() for t in torch.linspace(-1, 1, 81))
        return {"verification_accuracy": best / (len(pos) + len(neg))}


class FaceEmbeddingModel:
    def __init__(self, backbone, header, loss):
        self.backbone, self.header, self.loss = backbone, header, loss
        self.params = [{"params": backbone.parameters()}, {"params": header.parameters()}]

    def fit(self, train_dataset, batch_size, optimizer, max_epochs, evaluator=None, log_every=10):
        loader = DataLoader(train_dataset, batch_size=batch_size, shuffle=True,
                            generator=torch.Generator().manual_seed(0))
        global_step = 0
        for epoch in range(max_epochs):
            self.header.train()
            self.backbone.train()
            window = []
            for inputs, labels in loader:
                if len(inputs) <= 1:
                    continue
                features = self.backbone(inputs)
                outputs = self.header(features, labels)
                loss_value = self.loss(outputs, labels)
                window.append(loss_value.item())
                optimizer.zero_grad()
                loss_value.backward()
                optimizer.step()
                global_step += 1
                if global_step % log_every == 0:
                    print(f"Epoch: {epoch + 1} - Global Step: {global_step} - Train_Loss: {sum(window) / len(window):.4f}")
                    window = []
            if evaluator is not None:
                print(f"Epoch {epoch + 1}: {evaluator(self.encode(evaluator.images))}")

    @torch.no_grad()
    def encode(self, images):
        self.backbone.eval()
        features = self.backbone(images)
        self.backbone.train()
        return features


def make_faces(n, identities, seed):
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(identities, 3, 16, 16, generator=torch.Generator().manual_seed(11))
    ids = torch.randint(0, identities, (n,), generator=g)
    return protos[ids] + 0.9 * torch.randn(n, 3, 16, 16, generator=g), ids


def main():
    torch.manual_seed(0)
    images, ids = make_faces(2400, identities=40, seed=1)
    val_images, val_ids = make_faces(300, identities=40, seed=2)
    backbone = Backbone(embedding_size=32)
    header = ArcFaceHeader(in_features=32, out_features=40)
    model = FaceEmbeddingModel(backbone, header, nn.CrossEntropyLoss())
    optimizer = torch.optim.SGD(params=model.params, lr=0.05, momentum=0.9, weight_decay=5e-4)
    model.fit(TensorDataset(images, ids), batch_size=64, optimizer=optimizer, max_epochs=3,
              evaluator=VerificationEvaluator(val_images, val_ids))


if __name__ == "__main__":
    main()
