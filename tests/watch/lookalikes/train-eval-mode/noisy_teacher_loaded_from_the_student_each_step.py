"""A consistency-training loop with a noisy teacher: the teacher is a separately built network
whose weights are loaded from the student with load_state_dict and then follow it as an
exponential moving average; it is never switched to eval mode on purpose (its dropout is the
noise), and it labels two augmented views of every batch under torch.no_grad() on every step.
A grad-free training-mode forward run on every step is part of training, not an evaluation."""
import torch
import torch.nn.functional as F
from torch import nn


def build():
    return nn.Sequential(nn.Linear(12, 64), nn.ReLU(), nn.Dropout(0.3), nn.Linear(64, 3))


class ConsistencyTrainer:
    def __init__(self, student, teacher, decay=0.99):
        self.student, self.teacher, self.decay = student, teacher, decay
        self.teacher.load_state_dict(student.state_dict())
        for p in self.teacher.parameters():
            p.requires_grad_(False)
        self.optimizer = torch.optim.Adam(student.parameters(), lr=2e-3)

    def augment(self, x, g):
        return x + 0.1 * torch.randn(x.shape, generator=g)

    def step(self, x, y, g):
        weak, strong = self.augment(x, g), self.augment(x, g)
        with torch.no_grad():
            target = 0.5 * (F.softmax(self.teacher(weak), 1) + F.softmax(self.teacher(strong), 1))
        logits = self.student(strong)
        loss = F.cross_entropy(logits, y) + F.kl_div(F.log_softmax(logits, 1), target, reduction="batchmean")
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        with torch.no_grad():
            for t, s in zip(self.teacher.parameters(), self.student.parameters()):
                t.mul_(self.decay).add_(s, alpha=1 - self.decay)
        return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    trainer = ConsistencyTrainer(build(), build())
    trainer.student.train()
    for _ in range(80):
        x = torch.randn(32, 12, generator=g)
        y = (x[:, 0] > 0).long() + (x[:, 1] > 1).long()
        loss = trainer.step(x, y, g)
    print(f"last loss {loss:.3f}")


if __name__ == "__main__":
    main()
