"""A Lightning-like module (training_step / configure_optimizers) driven by a tiny hand-written
loop that calls configure_optimizers() at the start of every epoch, so SGD with momentum gets a
fresh, empty momentum buffer each epoch (and the StepLR restarts with it)."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class LitClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(12, 48), nn.ReLU(), nn.Linear(48, 4))
        self.loss_fn = nn.CrossEntropyLoss()

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch):
        x, y = batch
        return self.loss_fn(self(x), y)

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9, nesterov=True)
        return optimizer, torch.optim.lr_scheduler.StepLR(optimizer, step_size=100, gamma=0.5)


def fit(module, loader, epochs):
    for epoch in range(epochs):
        optimizer, scheduler = module.configure_optimizers()
        module.train()
        for batch in loader:
            loss = module.training_step(batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(192, 12, generator=g)
    y = x[:, :4].argmax(1)
    loader = DataLoader(TensorDataset(x, y), batch_size=24, shuffle=True, generator=g)
    print(f"loss {fit(LitClassifier(), loader, epochs=8):.3f}")


if __name__ == "__main__":
    main()
