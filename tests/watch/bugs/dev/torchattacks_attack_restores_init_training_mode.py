"""PGD adversarial training with an attack-library-style Attack base class: the attack object is
built once next to the model, remembers model.training at construction time, and every call puts
the model in eval() for the attack and then "switches back" to that remembered mode. The attack is
built while the model is training, so after model.eval() the per-epoch robust evaluation calls
atk(x, y) and gets the model handed back in train() mode: the robust and clean test accuracies are
computed with batch statistics, and BatchNorm's running averages absorb the adversarial test batches.

Thread: https://github.com/Harry24k/adversarial-attacks-pytorch/issues/21
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Attack:
    def __init__(self, name, model):
        self.attack, self.model = name, model
        self.training = model.training  # the mode to restore, fixed here once

    def _switch_model(self):
        self.model.train() if self.training else self.model.eval()

    def __call__(self, images, labels):
        self.model.eval()
        adv = self.forward(images, labels)
        self._switch_model()
        return adv


class PGD(Attack):
    def __init__(self, model, eps=0.1, alpha=0.025, steps=4):
        super().__init__("PGD", model)
        self.eps, self.alpha, self.steps = eps, alpha, steps

    def forward(self, images, labels):
        adv = (images + torch.empty_like(images).uniform_(-self.eps, self.eps)).clamp(0, 1).detach()
        for _ in range(self.steps):
            adv.requires_grad_(True)
            cost = F.cross_entropy(self.model(adv), labels)
            grad = torch.autograd.grad(cost, adv)[0]
            adv = adv.detach() + self.alpha * grad.sign()
            adv = (images + (adv - images).clamp(-self.eps, self.eps)).clamp(0, 1).detach()
        return adv


def make_split(n, seed):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 4, (n,), generator=g)
    protos = torch.rand(4, 1, 10, 10, generator=torch.Generator().manual_seed(7))
    x = (0.6 * protos[y] + 0.4 * torch.rand(n, 1, 10, 10, generator=g)).clamp(0, 1)
    return TensorDataset(x, y)


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 4))
    atk = PGD(model, eps=0.1, alpha=0.025, steps=4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    train_loader = DataLoader(make_split(1280, 1), batch_size=64, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    test_loader = DataLoader(make_split(256, 2), batch_size=64)
    for epoch in range(4):
        model.train()
        for x, y in train_loader:
            adv = atk(x, y)
            loss = F.cross_entropy(model(adv), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        robust = clean = total = 0
        for x, y in test_loader:
            adv = atk(x, y)  # returns with the model in train() mode
            with torch.no_grad():
                robust += (model(adv).argmax(1) == y).sum().item()
                clean += (model(x).argmax(1) == y).sum().item()
            total += y.numel()
        print(f"epoch {epoch} loss {loss.item():.3f} clean acc {clean / total:.3f} "
              f"robust acc {robust / total:.3f} (model.training={model.training})")


if __name__ == "__main__":
    main()
