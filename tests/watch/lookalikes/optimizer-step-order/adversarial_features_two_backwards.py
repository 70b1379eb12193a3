"""Domain-adversarial features: the encoder gets two backward() calls before one step, the task
loss and the negated domain loss (it learns to fool the domain classifier). The gradients add, and
since the two losses differ they do not cancel: every step moves the encoder."""
import torch
from torch import nn


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    encoder = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 16))
    task_head, domain_head = nn.Linear(16, 3), nn.Linear(16, 2)
    opt_main = torch.optim.Adam(list(encoder.parameters()) + list(task_head.parameters()), lr=1e-3)
    opt_domain = torch.optim.Adam(domain_head.parameters(), lr=1e-3)
    ce = nn.CrossEntropyLoss()
    for step in range(80):
        x = torch.randn(64, 10, generator=g)
        y = (x[:, 0] > 0).long() + (x[:, 1] > 1).long()
        domain = torch.randint(0, 2, (64,), generator=g)
        x = x + domain.unsqueeze(1).float() * 0.5

        opt_domain.zero_grad()
        ce(domain_head(encoder(x).detach()), domain).backward()
        opt_domain.step()

        opt_main.zero_grad()
        features = encoder(x)
        ce(task_head(features), y).backward(retain_graph=True)
        (-0.1 * ce(domain_head(features), domain)).backward()
        opt_main.step()
    print("done")


if __name__ == "__main__":
    main()
