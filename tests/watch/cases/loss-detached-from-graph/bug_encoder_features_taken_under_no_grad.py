"""Fine-tuning a two-part segmentation-style model whose config asks for the encoder to be trained
(train_encoder=True): the optimizer is built over model.parameters(), encoder included. The training
step computes the encoder features inside torch.no_grad() (left over from a feature-caching
version of the script) and then runs the decoder, so the encoder never receives a gradient and
only the decoder learns. A train_step(model, batch, optimizer) helper runs each step."""
import torch
import torch.nn.functional as F
from torch import nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())

    def forward(self, x):
        return self.net(x)


class Decoder(nn.Module):
    def __init__(self, classes=3):
        super().__init__()
        self.head = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, classes, 1))

    def forward(self, feats):
        return self.head(feats)


class SegModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder, self.decoder = Encoder(), Decoder()


def train_step(model, batch, optimizer, train_encoder=True):
    images, masks = batch
    with torch.no_grad():   # bug: the encoder is meant to train (train_encoder=True) but runs without grad
        feats = model.encoder(images)
    loss = F.cross_entropy(model.decoder(feats), masks)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def make_batch(g, size=8):
    images = torch.rand(size, 1, 16, 16, generator=g)
    masks = (images[:, 0] * 3).long().clamp(max=2)
    return images, masks


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = SegModel()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    for step in range(70):
        loss = train_step(model, make_batch(g), optimizer)
        if step % 20 == 0:
            print(f"step {step} loss {loss:.4f}")


if __name__ == "__main__":
    main()
