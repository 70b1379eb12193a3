"""Healthy look-alike of multiclass-with-binary-loss: a multi-label student distilled from a
teacher with BCEWithLogitsLoss on the teacher's sigmoid probabilities. The targets are floats
between 0 and 1, not 0 or 1, which a binary cross-entropy takes as soft labels; none is outside
[0, 1]."""
import torch
from torch import nn


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1024, 12, generator=g)
    teacher = nn.Sequential(nn.Linear(12, 64), nn.ReLU(), nn.Linear(64, 5)).eval()
    student = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 5))
    optimizer = torch.optim.Adam(student.parameters(), lr=1e-3)
    criterion = nn.BCEWithLogitsLoss()
    for step in range(60):
        idx = torch.randint(0, 1024, (64,), generator=g)
        with torch.no_grad():
            soft = torch.sigmoid(teacher(x[idx]) / 2.0)
        loss = criterion(student(x[idx]), soft)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
