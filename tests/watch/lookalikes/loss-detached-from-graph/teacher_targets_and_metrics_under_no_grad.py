"""Knowledge distillation with a frozen teacher: each step computes the student's logits with grad
enabled, then, under `with torch.no_grad():`, the teacher's logits on the same images (the teacher
reads the data, not the student's output) and the batch accuracy and confidence of the student's
logits (no network is called on them, nothing is rebound). The loss is the KL term against the
teacher plus cross entropy; both train the student. After backward() a second no_grad block runs a
linear probe on the student's output for the log, as many training loops do."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

T = 2.0


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(640, 20, generator=g)
    y = x[:, :5].argmax(1)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g)
    teacher = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 5)).eval()
    student = nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 5))
    probe = nn.Linear(5, 2)
    optimizer = torch.optim.Adam(student.parameters(), lr=2e-3)
    for epoch in range(3):
        for xb, yb in loader:
            logits = student(xb)
            with torch.no_grad():
                t_logits = teacher(xb)
                accuracy = (logits.argmax(1) == yb).float().mean()
                confidence = logits.softmax(-1).max(1).values.mean()
            kd = F.kl_div(F.log_softmax(logits / T, -1), F.softmax(t_logits / T, -1), reduction="batchmean") * T * T
            loss = kd + F.cross_entropy(logits, yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                probe_out = probe(logits)
        print(f"epoch {epoch} loss {loss.item():.4f} acc {accuracy.item():.3f} conf {confidence.item():.3f} "
              f"probe {probe_out.mean().item():.3f}")


if __name__ == "__main__":
    main()
