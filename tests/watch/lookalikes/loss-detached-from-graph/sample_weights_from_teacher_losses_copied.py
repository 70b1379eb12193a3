"""Healthy: self-paced distillation. A frozen teacher's per-sample errors, computed with grad enabled,
are copied with torch.tensor(...) into sample weights (a softmax over the batch), which multiply the
student's per-sample errors: the copy weighs a term with a graph, it is not itself a term."""
import torch
from torch import nn


def per_sample_error(model, x, y):
    return (model(x).squeeze(1) - y).pow(2)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(960, 12, generator=g)
    y = torch.sin(x[:, 0]) + 0.5 * x[:, 1]
    teacher = nn.Sequential(nn.Linear(12, 64), nn.ReLU(), nn.Linear(64, 1)).requires_grad_(False)
    teacher[0].weight.requires_grad_(True)  # fine-tuned elsewhere: its outputs carry a graph here
    student = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.Adam(student.parameters(), lr=3e-3)
    for epoch in range(3):
        for i in range(0, 960, 48):
            xb, yb = x[i:i + 48], y[i:i + 48]
            hardness = torch.tensor(list(per_sample_error(teacher, xb, yb)))
            weights = torch.softmax(-hardness, 0)
            loss = (weights * per_sample_error(student, xb, yb)).sum() + 0.01
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
