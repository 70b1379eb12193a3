"""Accumulation in the fairseq manner: every micro-batch's loss is summed over its samples
(reduction="sum") and back-propagated as is, and before the step the accumulated gradients are
divided by the number of samples the window held, so the update is the window's mean gradient."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2048, 20, generator=g)
    y = (x[:, :5] @ torch.randn(5, 4, generator=g)).argmax(1)
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, generator=g)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss(reduction="sum")
    update_freq, samples = 4, 0
    for epoch in range(2):
        for i, (xb, yb) in enumerate(loader):
            loss = criterion(model(xb), yb)
            loss.backward()
            samples += len(yb)
            if (i + 1) % update_freq == 0:
                for p in model.parameters():
                    p.grad.div_(samples)
                optimizer.step()
                optimizer.zero_grad()
                samples = 0
        print(f"epoch {epoch} loss {loss.item() / len(yb):.3f}")


if __name__ == "__main__":
    main()
