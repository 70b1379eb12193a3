"""A minimal tabular regression from a forum question: learn an order total as the sum of three
numeric columns of a table (item price, shipping, tax, all uniform in [0, 1)) with a single
bias-free nn.Linear(3, 1) in an nn.Sequential whose weight is re-initialised to zeros as a
(1, 3) Parameter; full-batch training for a few hundred epochs with SGD (lr 0.1), MSELoss and a
ReduceLROnPlateau scheduler stepped on the loss, printing the loss every 20 epochs. The bug: the
model outputs (N, 1) while the target built as the sum of the columns is (N,), so MSELoss
broadcasts them to an (N, N) grid (only a UserWarning), every prediction is pulled toward all
targets of the batch rather than its own row's total, the weights stop short of (1, 1, 1), and the
loss stalls above the target variance instead of going to ~0; a forum moderator pointed to the warning and the reporter's shape, and
unsqueezing the target made the model learn.

Thread: https://discuss.pytorch.org/t/output-of-the-model-depends-on-the-shape-of-the-weights-tensor/148155
"""
import torch
from torch import nn


def main():
    torch.manual_seed(0)
    table = torch.rand((1024, 3))  # price, shipping, tax
    total = table[:, 0] + table[:, 1] + table[:, 2]

    model = nn.Sequential(nn.Linear(3, 1, bias=False))
    model[0].weight = nn.Parameter(torch.zeros((1, 3)))

    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, "min", factor=0.5, patience=20)
    criterion = nn.MSELoss()
    for epoch in range(300):
        optimizer.zero_grad()
        pred = model(table)
        loss = criterion(pred, total)
        loss.backward()
        optimizer.step()
        if epoch % 20 == 0:
            print(f"epoch {epoch} loss {loss.item():.6f} lr {optimizer.param_groups[0]['lr']:.4f}")
        scheduler.step(loss)
    print("learned weights", model[0].weight.data.tolist(), "target variance", total.var().item())


if __name__ == "__main__":
    main()
