"""The fixed twin: the caller passes the training split's mean and std of the envelope to
EnvelopeModule, so training_step regresses standardised targets on a unit scale and predict()
maps the outputs back to linear amplitude."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class EnvelopeModule(nn.Module):
    def __init__(self, features, target_mean=0.0, target_std=1.0):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, 128), nn.GELU(), nn.Linear(128, 128), nn.GELU(),
                                 nn.Linear(128, 1))
        self.target_mean, self.target_std = float(target_mean), float(target_std)

    def forward(self, x):
        return self.net(x).squeeze(-1)

    def training_step(self, batch, batch_idx):
        x, envelope = batch
        target = (envelope - self.target_mean) / self.target_std
        return nn.functional.mse_loss(self(x), target)

    def predict(self, x):
        return self(x) * self.target_std + self.target_mean   # back to linear amplitude

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)


def fit(module, loader, max_steps):
    optimizer = module.configure_optimizers()
    step = 0
    while step < max_steps:
        for batch_idx, batch in enumerate(loader):
            loss = module.training_step(batch, batch_idx)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step == max_steps:
                break
    return loss.item()


def make_frames(n, g):
    x = torch.randn(n, 12, generator=g)
    loudness = torch.tanh(0.8 * x[:, 0] + 0.5 * x[:, 1] * x[:, 2] - 0.3 * x[:, 3])
    return x, 1e-3 * (1 + loudness)   # linear amplitude, 0 to 0.002


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    train_x, train_env = make_frames(1024, g)
    val_x, val_env = make_frames(256, g)
    module = EnvelopeModule(features=12, target_mean=train_env.mean(), target_std=train_env.std())
    loader = DataLoader(TensorDataset(train_x, train_env), batch_size=32, shuffle=True,
                        generator=torch.Generator().manual_seed(1))
    loss = fit(module, loader, max_steps=60)
    with torch.no_grad():
        mse = nn.functional.mse_loss(module.predict(val_x), val_env).item()
    print(f"last training loss {loss:.2e}, validation R^2 {1 - mse / val_env.var().item():.2f}")


if __name__ == "__main__":
    main()
