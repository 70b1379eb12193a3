"""train()/evaluate() helpers receiving the model and optimizer, with a StepLR; the fix: the
scheduler ticks at the end of each epoch, after train() ran the epoch's optimizer steps."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def train(model, optimizer, loader, loss_fn):
    model.train()
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
    return loss.item()


@torch.no_grad()
def evaluate(model, loader, loss_fn):
    model.eval()
    return sum(loss_fn(model(x), y).item() for x, y in loader) / len(loader)


def main():
    torch.manual_seed(1)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(640, 3, 8, 8, generator=g)
    y = (x.mean((1, 2, 3)) > 0).long()
    train_loader = DataLoader(TensorDataset(x[:512], y[:512]), batch_size=64, shuffle=True, generator=g)
    val_loader = DataLoader(TensorDataset(x[512:], y[512:]), batch_size=64)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(6):
        train_loss = train(model, optimizer, train_loader, loss_fn)
        val_loss = evaluate(model, val_loader, loss_fn)
        scheduler.step()
        print(f"epoch {epoch}: train {train_loss:.3f} val {val_loss:.3f}")


if __name__ == "__main__":
    main()
