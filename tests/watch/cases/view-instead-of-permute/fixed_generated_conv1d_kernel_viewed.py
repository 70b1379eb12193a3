"""The fixed twin: the generated (in_channels, k * out_channels) kernel is viewed as
(in_channels, k, out_channels), its own layout, then permuted to the (out_channels, in_channels, k)
conv weight."""
import torch
import torch.nn.functional as F
from torch import nn

IN_CH, OUT_CH, K, LENGTH, CLASSES = 3, 16, 5, 64, 4


def conv_weight(generated, in_ch, k, out_ch):
    return generated.view(in_ch, k, out_ch).permute(2, 0, 1)


class GeneratedStem(nn.Module):
    def __init__(self, desc_dim=6, k=K, out_ch=OUT_CH):
        super().__init__()
        self.k, self.out_ch = k, out_ch
        self.hyper = nn.Sequential(nn.Linear(desc_dim, 32), nn.GELU(), nn.Linear(32, k * out_ch))

    def forward(self, x, descriptors):
        generated = self.hyper(descriptors)                   # (in_ch, k * out_ch)
        weight = conv_weight(generated, descriptors.shape[0], self.k, self.out_ch)
        return F.conv1d(x, 0.3 * weight, padding=self.k // 2)


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = GeneratedStem()
        self.head = nn.Linear(OUT_CH, CLASSES)

    def forward(self, x, descriptors):
        return self.head(F.relu(self.stem(x, descriptors)).mean(-1))


class Trainer:
    def __init__(self, model, descriptors, lr=3e-3):
        self.model, self.descriptors = model, descriptors
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    def step(self, x, y):
        loss = F.cross_entropy(self.model(x, self.descriptors), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


def batch(g, n=32):
    y = torch.randint(0, CLASSES, (n,), generator=g)
    t = torch.arange(LENGTH).float()
    freq = (1 + y.float())[:, None, None] * torch.tensor([0.05, 0.1, 0.2])[None, :, None]
    x = torch.sin(freq * t) + 0.3 * torch.randn(n, IN_CH, LENGTH, generator=g)
    return x, y


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    descriptors = torch.randn(IN_CH, 6, generator=g)
    trainer = Trainer(Classifier(), descriptors)
    for step in range(60):
        loss = trainer.step(*batch(g))
        if step % 20 == 0:
            print(f"step {step} loss {loss:.3f}")


if __name__ == "__main__":
    main()
