"""Semi-supervised training in the FixMatch style, with a train_step() method on a trainer class: the
labelled batch gets cross-entropy; the unlabelled batch's weak view gives pseudo-labels (argmax of its
logits) and a confidence mask (their max probability above 0.7), and the strong view is trained on
those pseudo-labels, weighted by the mask. The step also logs the labelled batch's accuracy, taken
with argmax before backward(). The indices are a loss function's targets and a weight of a term that
carries gradient, or only logged: every term of the loss trains the model."""
import torch
import torch.nn.functional as F
from torch import nn


class Trainer:
    def __init__(self, model, lr=3e-3):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)

    def train_step(self, x, y, u_weak, u_strong):
        logits = self.model(x)
        accuracy = (logits.argmax(1) == y).float().mean()
        weak = self.model(u_weak)
        probs = weak.softmax(1)
        pseudo = weak.argmax(1)
        mask = (probs.max(1).values > 0.7).float()
        unsup = (F.cross_entropy(self.model(u_strong), pseudo, reduction="none") * mask).mean()
        loss = F.cross_entropy(logits, y) + unsup
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item(), accuracy.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    centers = torch.randn(5, 20, generator=g) * 2
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5))
    trainer = Trainer(model)
    for step in range(60):
        y = torch.randint(0, 5, (16,), generator=g)
        x = centers[y] + torch.randn(16, 20, generator=g)
        uy = torch.randint(0, 5, (48,), generator=g)
        u = centers[uy] + torch.randn(48, 20, generator=g)
        out = trainer.train_step(x, y, u + 0.1 * torch.randn(48, 20, generator=g),
                                 u + 0.5 * torch.randn(48, 20, generator=g))
        if step % 20 == 0:
            print(step, out)


if __name__ == "__main__":
    main()
