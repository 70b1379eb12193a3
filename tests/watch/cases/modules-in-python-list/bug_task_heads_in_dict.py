"""A multi-task model whose per-task heads sit in a plain dict keyed by task name; a Trainer
class alternates tasks and builds its optimizer from model.parameters(), which holds only the
shared encoder, so no head ever trains."""
import torch
import torch.nn.functional as F
from torch import nn


class MultiTask(nn.Module):
    def __init__(self, tasks, d=16, width=32):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(d, width), nn.ReLU())
        self.heads = {name: nn.Linear(width, classes) for name, classes in tasks.items()}

    def forward(self, x, task):
        return self.heads[task](self.encoder(x))


class Trainer:
    def __init__(self, model, lr=3e-3):
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr)

    def step(self, x, y, task):
        loss = F.cross_entropy(self.model(x, task), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    tasks = {"colour": 3, "shape": 5}
    trainer = Trainer(MultiTask(tasks))
    for step in range(60):
        task = "colour" if step % 2 == 0 else "shape"
        x = torch.randn(32, 16, generator=g)
        y = x[:, :tasks[task]].argmax(1)
        loss = trainer.step(x, y, task)
        if step % 20 == 0:
            print(f"step {step} {task} loss {loss:.3f}")


if __name__ == "__main__":
    main()
