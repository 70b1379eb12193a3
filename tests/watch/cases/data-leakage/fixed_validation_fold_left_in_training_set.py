"""Cross-validation over recording sessions: for each held-out test session the previous session is
the validation set, and the training set is meant to be the rest. The helper build_training_set()
skips both the test and the validation session. A fit() helper evaluates on both held-out loaders
after every epoch and keeps the checkpoint with the best validation accuracy."""
import copy

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

SESSIONS, PER_SESSION, FEATURES, CLASSES = 5, 160, 32, 4


def make_sessions(g):
    centers = torch.randn(CLASSES, FEATURES, generator=g)
    sessions = []
    for _ in range(SESSIONS):
        shift = 0.8 * torch.randn(FEATURES, generator=g)       # every session drifts a little
        y = torch.randint(0, CLASSES, (PER_SESSION,), generator=g)
        x = 0.5 * centers[y] + shift + torch.randn(PER_SESSION, FEATURES, generator=g)
        sessions.append((x, y))
    return sessions


def build_training_set(sessions, test_id, val_id):
    xs, ys = [], []
    for i, (x, y) in enumerate(sessions):
        if i in (test_id, val_id):   # fixed: both held-out sessions stay out of training
            continue
        xs.append(x)
        ys.append(y)
    return TensorDataset(torch.cat(xs), torch.cat(ys))


def accuracy(model, loader):
    model.eval()
    with torch.no_grad():
        hits = sum((model(x).argmax(1) == y).sum().item() for x, y in loader)
    model.train()
    return hits / len(loader.dataset)


def fit(model, train_loader, val_loader, test_loader, epochs):
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    best, best_state = -1.0, None
    for epoch in range(epochs):
        for x, y in train_loader:
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        val_acc, test_acc = accuracy(model, val_loader), accuracy(model, test_loader)
        if val_acc > best:
            best, best_state = val_acc, copy.deepcopy(model.state_dict())
        print(f"epoch {epoch} val acc {val_acc:.3f} test acc {test_acc:.3f}")
    return best_state


def main():
    torch.manual_seed(0)
    sessions = make_sessions(torch.Generator().manual_seed(0))
    test_id, val_id = 4, 3
    train_loader = DataLoader(build_training_set(sessions, test_id, val_id), batch_size=32, shuffle=True)
    val_loader = DataLoader(TensorDataset(*sessions[val_id]), batch_size=80)
    test_loader = DataLoader(TensorDataset(*sessions[test_id]), batch_size=80)
    model = nn.Sequential(nn.Linear(FEATURES, 128), nn.ReLU(), nn.Linear(128, CLASSES))
    fit(model, train_loader, val_loader, test_loader, epochs=3)


if __name__ == "__main__":
    main()
