"""Fixed twin of bug_validate_without_eval_or_no_grad: validate() puts the model in eval mode under
no_grad (and train_step() puts it back in training mode)."""
import torch
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(20, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Dropout(0.3),
                                  nn.Linear(64, 4))

    def forward(self, x):
        return self.body(x)


class Trainer:
    def __init__(self, model, val_batches):
        self.model, self.val_batches = model, val_batches
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def train_step(self, x, y):
        self.model.train()
        loss = F.cross_entropy(self.model(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()

    @torch.no_grad()
    def validate(self):
        self.model.eval()
        losses, correct, seen = [], 0, 0
        for x, y in self.val_batches:
            logits = self.model(x)
            losses.append(F.cross_entropy(logits, y).item())
            correct += (logits.argmax(1) == y).sum().item()
            seen += len(y)
        return sum(losses) / len(losses), correct / seen


def batches(n, g, w):
    out = []
    for _ in range(n):
        x = torch.randn(32, 20, generator=g)
        out.append((x, (x @ w).argmax(1)))
    return out


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    w = torch.randn(20, 4, generator=g)
    trainer = Trainer(Net(), batches(4, g, w))
    for step, (x, y) in enumerate(batches(60, g, w)):
        loss = trainer.train_step(x, y)
        if step % 10 == 9:
            val_loss, val_acc = trainer.validate()
            print(f"step {step} loss {loss:.3f} val loss {val_loss:.3f} val acc {val_acc:.3f}")


if __name__ == "__main__":
    main()
