"""A Trainer class; the fix: the model and AdamW's state stay float32 and the forward pass runs
under float16 autocast with a GradScaler (on CPU here), so eps and exp_avg_sq keep fp32's range."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model, loader):
        self.model = model
        self.loader = loader
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.scaler = torch.amp.GradScaler("cpu")
        self.loss_fn = nn.CrossEntropyLoss()

    def zero_grad(self):
        self.optimizer.zero_grad(set_to_none=True)

    def train_epoch(self):
        self.model.train()
        for x, y in self.loader:
            self.zero_grad()
            with torch.autocast("cpu", dtype=torch.float16):
                logits = self.model(x)
            loss = self.loss_fn(logits.float(), y)
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(384, 20, generator=g)
    y = (x[:, :5].sum(1) > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))
    trainer = Trainer(model, loader)
    for epoch in range(4):
        loss = trainer.train_epoch()
    print(f"loss {loss:.3f}")


if __name__ == "__main__":
    main()
