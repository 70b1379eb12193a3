"""A Trainer class with autocast and a GradScaler; the fix: optimizer_step() calls
scaler.unscale_(optimizer) after backward and before clip_grad_norm_, so the clip measures and
bounds the true gradient norm and scaler.step() does not divide again."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model, lr=0.05, max_norm=1.0):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        self.scaler = torch.amp.GradScaler("cpu")
        self.loss_fn = nn.CrossEntropyLoss()
        self.max_norm = max_norm

    def optimizer_step(self, loss):
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)

    def fit(self, loader, epochs):
        self.model.train()
        for _ in range(epochs):
            for x, y in loader:
                with torch.autocast("cpu", dtype=torch.float16):
                    loss = self.loss_fn(self.model(x).float(), y)
                self.optimizer_step(loss)
        return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 24, generator=g)
    y = (x[:, :6] @ torch.randn(6, 3, generator=g)).argmax(1)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g)
    model = nn.Sequential(nn.Linear(24, 64), nn.ReLU(), nn.Linear(64, 3))
    print(f"loss {Trainer(model).fit(loader, epochs=4):.3f}")


if __name__ == "__main__":
    main()
