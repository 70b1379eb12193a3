"""A geospatial model zoo: a Weights enum whose get_state_dict() returns the published checkpoint
(keys 'encoder.*' / 'decoder.*'), and a builder olmoearth_v1(weights) that constructs a wrapper
storing the network in self.model (so its keys are 'model.encoder.*') and ends with
model.load_state_dict(state_dict, strict=False). No key matches, strict=False drops all of them
without a word, and the "pretrained" encoder that a classification task then fine-tunes with a
linear head is randomly initialised.

Thread: https://github.com/torchgeo/torchgeo/issues/4036
"""
import enum

import torch
import torch.nn.functional as F
from torch import nn

BANDS, LATENT, WIDTH, CLASSES = 12, 6, 48, 4
MIXING = torch.randn(LATENT, BANDS, generator=torch.Generator().manual_seed(11))


class PretrainNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(BANDS, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH))
        self.decoder = nn.Linear(WIDTH, BANDS)


class OlmoEarthPretrainV1(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = PretrainNet()

    def forward(self, x):
        return self.model.encoder(x)


class OlmoEarthV1Weights(enum.Enum):
    NANO = "nano"

    def get_state_dict(self):
        # stands in for the downloaded checkpoint: an encoder that recovers the latent factors
        g = torch.Generator().manual_seed(3)
        unmix = torch.linalg.pinv(MIXING)  # [BANDS, LATENT]
        first = torch.cat([unmix.T, -unmix.T] * (WIDTH // (2 * LATENT)), 0)
        return {"encoder.0.weight": first, "encoder.0.bias": torch.zeros(WIDTH),
                "encoder.2.weight": torch.eye(WIDTH) + 0.01 * torch.randn(WIDTH, WIDTH, generator=g),
                "encoder.2.bias": torch.zeros(WIDTH),
                "decoder.weight": 0.02 * torch.randn(BANDS, WIDTH, generator=g), "decoder.bias": torch.zeros(BANDS)}


def olmoearth_v1(weights=None):
    model = OlmoEarthPretrainV1()
    if weights is not None:
        state_dict = weights.get_state_dict()
        model.load_state_dict(state_dict, strict=False)
    return model


class ClassificationTask(nn.Module):
    def __init__(self, weights, lr=1e-3):
        super().__init__()
        self.backbone = olmoearth_v1(weights=weights)
        self.head = nn.Linear(WIDTH, CLASSES)
        self.lr = lr

    def forward(self, x):
        return self.head(self.backbone(x))

    def training_step(self, batch):
        x, y = batch
        return F.cross_entropy(self(x), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.lr)


def pixel_batches(n, batch_size, seed):
    g = torch.Generator().manual_seed(seed)
    readout = torch.randn(LATENT, CLASSES, generator=torch.Generator().manual_seed(5))
    out = []
    for _ in range(n):
        z = torch.randn(batch_size, LATENT, generator=g)
        out.append((z @ MIXING + 0.1 * torch.randn(batch_size, BANDS, generator=g), (z @ readout).argmax(1)))
    return out


def main():
    torch.manual_seed(0)
    task = ClassificationTask(weights=OlmoEarthV1Weights.NANO)
    optimizer = task.configure_optimizers()
    train, val = pixel_batches(25, 32, seed=0), pixel_batches(5, 256, seed=1)
    for epoch in range(3):
        task.train()
        for batch in train:
            loss = task.training_step(batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        task.eval()
        with torch.no_grad():
            acc = torch.stack([(task(x).argmax(1) == y).float().mean() for x, y in val]).mean()
        print(f"epoch {epoch} train_loss {loss.item():.4f} val_acc {acc:.3f}")


if __name__ == "__main__":
    main()
