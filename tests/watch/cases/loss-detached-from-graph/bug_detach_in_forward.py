"""A two-stage model whose forward detaches the encoder's features (left over from a frozen-encoder
experiment), while the optimizer still holds the encoder: the encoder never gets a gradient."""
import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(1, 8, kernel_size=5, padding=2)
        self.proj = nn.Linear(8 * 32, 64)

    def forward(self, x):
        h = torch.relu(self.conv(x.unsqueeze(1)))
        return self.proj(h.flatten(1))


class Classifier(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.encoder = Encoder()
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(64, classes))

    def forward(self, x):
        features = self.encoder(x).detach()
        return self.head(features)


class Trainer:
    def __init__(self, model):
        self.model = model
        self.opt = torch.optim.AdamW(model.parameters(), lr=3e-3)

    def step(self, x, y):
        self.opt.zero_grad()
        loss = nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    x = torch.randn(400, 32)
    y = x.reshape(400, 4, 8).mean(-1).argmax(-1)
    trainer = Trainer(Classifier())
    for epoch in range(5):
        for i in range(0, 400, 40):
            loss = trainer.step(x[i:i + 40], y[i:i + 40])
    print(f"loss {loss:.3f}")


if __name__ == "__main__":
    main()
