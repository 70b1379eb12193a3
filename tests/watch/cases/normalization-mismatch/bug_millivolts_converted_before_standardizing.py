"""A class-based trainer for a sensor classifier: the readings arrive in millivolts, the channel
statistics were computed in millivolts too, but prepare() first converts the batch to volts and
then standardizes it with the millivolt mean and std. Every value lands near -mean/std, the
differences between recordings sit in the fourth decimal, and the MLP cannot tell them apart."""
import torch
import torch.nn.functional as F
from torch import nn

CHANNEL_MEAN = torch.tensor([820.0, 640.0, 1150.0, 300.0, 910.0, 480.0, 700.0, 1020.0])
CHANNEL_STD = torch.tensor([150.0, 90.0, 210.0, 60.0, 170.0, 80.0, 120.0, 190.0])


def recordings(n, g):
    labels = torch.randint(0, 4, (n,), generator=g)
    pattern = torch.randn(4, 8, generator=torch.Generator().manual_seed(5))
    z = pattern[labels] + 0.5 * torch.randn(n, 8, generator=g)
    return CHANNEL_MEAN + CHANNEL_STD * z, labels


class SensorTrainer:
    def __init__(self, model, lr=3e-3, convert_units=True):
        self.model, self.convert_units = model, convert_units
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    def prepare(self, millivolts):
        x = millivolts / 1000.0 if self.convert_units else millivolts
        return (x - CHANNEL_MEAN) / CHANNEL_STD

    def fit_epoch(self, data, batch_size=32):
        x_all, y_all = data
        self.model.train()
        for i in range(0, len(y_all), batch_size):
            loss = F.cross_entropy(self.model(self.prepare(x_all[i:i + batch_size])), y_all[i:i + batch_size])
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        return loss.item()

    @torch.no_grad()
    def accuracy(self, data):
        self.model.eval()
        return (self.model(self.prepare(data[0])).argmax(1) == data[1]).float().mean().item()


def main(convert_units=True):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    train, val = recordings(640, g), recordings(160, g)
    trainer = SensorTrainer(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4)), convert_units=convert_units)
    for epoch in range(4):
        loss = trainer.fit_epoch(train)
        print(f"epoch {epoch} loss {loss:.3f} val acc {trainer.accuracy(val):.3f}")


if __name__ == "__main__":
    main()
