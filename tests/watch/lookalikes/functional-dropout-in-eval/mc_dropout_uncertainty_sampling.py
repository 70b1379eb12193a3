"""Healthy look-alike of functional-dropout-in-eval and train-eval-mode: Monte Carlo dropout for
uncertainty. After each training epoch the model is put in eval mode, its nn.Dropout layers are
switched back on on purpose, and it predicts the unlabelled pool 20 times in a row under no_grad;
the spread of those predictions ranks the samples to label next (BALD-style). Dropping units in
eval mode is the point here."""
import torch
import torch.nn.functional as F
from torch import nn


def enable_mc_dropout(model):
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.train()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    w = torch.randn(16, 3, generator=g)
    x_train = torch.randn(512, 16, generator=g)
    y_train = (x_train @ w).argmax(1)
    pool = torch.randn(256, 16, generator=g)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.3), nn.Linear(64, 3))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(4):
        model.train()
        for i in range(0, 512, 32):
            loss = F.cross_entropy(model(x_train[i:i + 32]), y_train[i:i + 32])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        enable_mc_dropout(model)
        with torch.no_grad():
            probs = torch.stack([F.softmax(model(pool), -1) for _ in range(20)])
        mean = probs.mean(0)
        bald = -(mean * mean.clamp_min(1e-9).log()).sum(1) + (probs * probs.clamp_min(1e-9).log()).sum(2).mean(0)
        print(f"epoch {epoch} loss {loss.item():.4f} most uncertain {bald.topk(3).indices.tolist()}")


if __name__ == "__main__":
    main()
