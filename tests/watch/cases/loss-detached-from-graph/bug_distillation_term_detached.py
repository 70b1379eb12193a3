"""Knowledge distillation in a train_epoch(student, teacher, ...) helper: meaning to stop gradients
into the teacher, the code detaches the whole KL term instead of the teacher's logits, so the
distillation term sends nothing to the student, which learns from the labels alone."""
import torch
import torch.nn.functional as F
from torch import nn


def make_net(width):
    return nn.Sequential(nn.Linear(16, width), nn.ReLU(), nn.Linear(width, 5))


def distill_loss(student_logits, teacher_logits, T=4.0):
    return F.kl_div(F.log_softmax(student_logits / T, dim=1), F.softmax(teacher_logits / T, dim=1),
                    reduction="batchmean") * T * T


def train_epoch(student, teacher, optimizer, batches, alpha=0.7):
    student.train()
    teacher.eval()
    for x, y in batches:
        s_logits, t_logits = student(x), teacher(x)
        kd = distill_loss(s_logits, t_logits).detach()
        loss = alpha * kd + (1 - alpha) * F.cross_entropy(s_logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    teacher, student = make_net(64), make_net(8)
    batches = []
    for _ in range(30):
        x = torch.randn(32, 16, generator=g)
        batches.append((x, (x[:, :5] * 2).argmax(1)))
    optimizer = torch.optim.SGD(student.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(3):
        print(f"epoch {epoch} loss {train_epoch(student, teacher, optimizer, batches):.3f}")


if __name__ == "__main__":
    main()
