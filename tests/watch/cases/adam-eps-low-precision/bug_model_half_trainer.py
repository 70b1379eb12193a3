"""A Trainer class that casts the whole model to float16 with model.half() "to save memory" and
trains it with AdamW at its default eps=1e-8: the optimizer state is float16, eps is 0 there and
exp_avg_sq underflows, so the updates divide by (almost) zero."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model, loader):
        self.model = model.half()
        self.loader = loader
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.loss_fn = nn.CrossEntropyLoss()

    def zero_grad(self):
        self.optimizer.zero_grad(set_to_none=True)

    def train_epoch(self):
        self.model.train()
        for x, y in self.loader:
            self.zero_grad()
            logits = self.model(x.half())
            loss = self.loss_fn(logits.float(), y)
            loss.backward()
            self.optimizer.step()
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
