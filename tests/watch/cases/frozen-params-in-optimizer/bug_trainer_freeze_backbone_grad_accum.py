"""A multi-label tagger (shared backbone + tag head) trained by a Trainer with gradient accumulation
over 2 batches and SGD with momentum and weight decay; after the first epoch the config's
freeze_backbone_after=1 makes the Trainer call freeze_backbone(), which only sets requires_grad=False.
The Trainer clears gradients with zero_grad(set_to_none=False) to keep the accumulation buffers, so
the frozen weights keep a zero .grad and SGD keeps moving them with the epoch-1 momentum and the
weight decay: after the freeze the "frozen" backbone weights still move by up to 0.015."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CONFIG = {"lr": 0.05, "momentum": 0.9, "weight_decay": 1e-4, "batch_size": 32, "accumulate": 2, "epochs": 5,
          "freeze_backbone_after": 1}


class Tagger(nn.Module):
    def __init__(self, features=20, hidden=64, tags=6):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, tags)

    def forward(self, x):
        return self.head(self.backbone(x))


class Trainer:
    def __init__(self, model, cfg):
        self.model, self.cfg = model, cfg
        self.optimizer = torch.optim.SGD(model.parameters(), lr=cfg["lr"], momentum=cfg["momentum"],
                                         weight_decay=cfg["weight_decay"])

    def freeze_backbone(self):
        for p in self.model.backbone.parameters():
            p.requires_grad_(False)

    def _clear_grads(self):
        self.optimizer.zero_grad(set_to_none=False)

    def train_epoch(self, loader):
        self.model.train()
        self._clear_grads()
        for i, (x, y) in enumerate(loader):
            loss = nn.functional.binary_cross_entropy_with_logits(self.model(x), y)
            (loss / self.cfg["accumulate"]).backward()
            if (i + 1) % self.cfg["accumulate"] == 0:
                self.optimizer.step()
                self._clear_grads()
        return loss.item()

    def fit(self, loader):
        for epoch in range(self.cfg["epochs"]):
            if epoch == self.cfg["freeze_backbone_after"]:
                self.freeze_backbone()
            loss = self.train_epoch(loader)
        return loss


def make_data(n, g):
    x = torch.randn(n, 20, generator=g)
    tags = (x[:, :6] + 0.5 * x[:, 6:12] > 0.3).float()
    return x, tags


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    loader = DataLoader(TensorDataset(*make_data(640, g)), batch_size=CONFIG["batch_size"], shuffle=True, generator=g)
    trainer = Trainer(Tagger(), CONFIG)
    print(f"loss {trainer.fit(loader):.3f}")


if __name__ == "__main__":
    main()
