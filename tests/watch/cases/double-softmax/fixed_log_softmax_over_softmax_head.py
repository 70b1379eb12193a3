"""The fixed twin: the head returns logits (the Softmax moved to the inference helper), and the
training helper's F.log_softmax normalises them once."""
import torch
import torch.nn.functional as F
from torch import nn

CLASSES = 8


class TagNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv1d(1, 16, 9, padding=4), nn.ReLU(), nn.AdaptiveMaxPool1d(8), nn.Flatten())
        self.head = nn.Sequential(nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, CLASSES))

    def forward(self, x):
        return self.head(self.features(x))


def train_epoch(model, optimizer, x, y, batch_size=32):
    model.train()
    for i in range(0, len(x), batch_size):
        outputs = model(x[i:i + batch_size])
        loss = F.nll_loss(F.log_softmax(outputs, dim=1), y[i:i + batch_size])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, CLASSES, (1600,), generator=g)
    t = torch.arange(256).float()
    x = torch.sin((1 + y).float()[:, None] * t * 0.05)[:, None] + 0.3 * torch.randn(1600, 1, 256, generator=g)
    model = TagNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(3):
        print(f"epoch {epoch} loss {train_epoch(model, optimizer, x, y):.3f}")


if __name__ == "__main__":
    main()
