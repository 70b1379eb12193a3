"""A Hugging Face-like training loop with a linear warmup-then-decay schedule (a LambdaLR built
by a helper), stepped once per batch and given num_training_steps=epochs * len(loader): the
learning rate reaches 0 only at the last batch."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return current_step / max(1, num_warmup_steps)
        return max(0.0, (num_training_steps - current_step) / max(1, num_training_steps - num_warmup_steps))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(10, 64), nn.GELU(), nn.LayerNorm(64), nn.Linear(64, 1))

    def forward(self, x):
        return self.net(x).squeeze(-1)


def train(model, loader, epochs, lr=1e-3):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=0, num_training_steps=epochs * len(loader))
    for epoch in range(epochs):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(640, 10, generator=g)
    y = torch.sin(x[:, 0]) + x[:, 1] * x[:, 2]
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g)
    print(f"loss {train(Regressor(), loader, epochs=3):.3f}")


if __name__ == "__main__":
    main()
