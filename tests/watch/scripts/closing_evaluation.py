"""A DataLoader training loop whose mistake, if any, is in what runs after the training, to test
the part of `kb watch --steps N` that runs the rest of the script in brief. argv[1] picks it:
  closing      after 6 epochs (each with a correct evaluation), a fresh model loads the trained
               weights and is evaluated under no_grad without model.eval(): dropout stays on (KBW012)
  clean        the same closing evaluation with model.eval()
  many-epochs  a correct run of 1000 epochs of 4 steps: the brief run stops at its step limit
  raises       the closing report concatenates one prediction per training batch, which an epoch
               cut to one batch does not give: it raises
"""
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def build():
    return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 2))


def evaluate(model, loader):
    model.eval()
    correct = 0
    with torch.no_grad():
        for xb, yb in loader:
            correct += (model(xb).argmax(1) == yb).sum().item()
    model.train()
    return correct


def main(mode):
    torch.manual_seed(0)
    n = 64 if mode == "many-epochs" else 800
    x, y = torch.randn(n, 20), torch.randint(0, 2, (n,))
    xv, yv = torch.randn(200, 20), torch.randint(0, 2, (200,))
    train_loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
    val_loader = DataLoader(TensorDataset(xv, yv), batch_size=20)
    model = build()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    last_epoch_outputs = []
    for epoch in range(1000 if mode == "many-epochs" else 6):
        last_epoch_outputs = []
        for xb, yb in train_loader:
            optimizer.zero_grad()
            out = model(xb)
            nn.functional.cross_entropy(out, yb).backward()
            optimizer.step()
            last_epoch_outputs.append(out.detach())
        correct = evaluate(model, val_loader)
        if epoch % 100 == 0 or mode != "many-epochs":
            print(f"epoch {epoch}: {correct} correct")
    if mode == "raises":
        outputs = torch.stack(last_epoch_outputs)   # one (16, 2) block per batch of the last epoch
        print("last epoch's mean output", outputs.view(len(train_loader), -1, 2).mean().item())
    if mode in ("closing", "clean"):
        final = build()
        final.load_state_dict(model.state_dict())
        if mode == "clean":
            final.eval()
        with torch.no_grad():
            correct = sum((final(xb).argmax(1) == yb).sum().item() for xb, yb in val_loader)
        print(f"final model: {correct} correct")


if __name__ == "__main__":
    main(sys.argv[1])
