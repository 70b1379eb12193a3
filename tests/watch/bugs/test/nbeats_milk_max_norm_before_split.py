"""An N-BEATS example notebook on a monthly milk-production series: the whole series is divided by
norm_constant = max(series) before anything else, then (backcast, forecast) windows are cut and
the first 80 % of the windows become the training set and the rest the test set. A generic
N-BEATS network (stacks of fully connected blocks, each returning a backcast and a forecast)
is trained with Adam and MSE by a train_grad_steps(data, net, optimiser) helper that pulls
batches from a data_generator, and an eval_test(...) helper multiplies predictions and targets
back by norm_constant and prints the test loss. The maximum used for the scaling is taken over
the whole series, i.e. mostly over the rising test period, so the network is trained on inputs
scaled with a statistic of the data it is evaluated on.

Thread: https://github.com/philipperemy/n-beats/issues/40
"""
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


class Block(nn.Module):
    def __init__(self, units, backcast_length, forecast_length):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(backcast_length, units), nn.ReLU(),
                                nn.Linear(units, units), nn.ReLU(), nn.Linear(units, units), nn.ReLU())
        self.theta_b = nn.Linear(units, backcast_length, bias=False)
        self.theta_f = nn.Linear(units, forecast_length, bias=False)

    def forward(self, x):
        h = self.fc(x)
        return self.theta_b(h), self.theta_f(h)


class NBeatsNet(nn.Module):
    def __init__(self, backcast_length, forecast_length, nb_blocks_per_stack=3, units=64, stacks=2):
        super().__init__()
        self.stacks = nn.ModuleList([
            nn.ModuleList([Block(units, backcast_length, forecast_length) for _ in range(nb_blocks_per_stack)])
            for _ in range(stacks)])
        self.forecast_length = forecast_length

    def forward(self, backcast):
        forecast = torch.zeros(backcast.shape[0], self.forecast_length)
        for stack in self.stacks:
            for block in stack:
                b, f = block(backcast)
                backcast = backcast - b
                forecast = forecast + f
        return backcast, forecast


def data_generator(x, y, batch_size, rng):
    while True:
        order = rng.permutation(len(x))
        for i in range(0, len(x) - batch_size + 1, batch_size):
            idx = order[i:i + batch_size]
            yield x[idx], y[idx]


def train_grad_steps(data, net, optimiser, steps):
    net.train()
    for _ in range(steps):
        x_batch, y_batch = next(data)
        optimiser.zero_grad()
        _, forecast = net(torch.tensor(x_batch, dtype=torch.float))
        loss = F.mse_loss(forecast, torch.tensor(y_batch, dtype=torch.float))
        loss.backward()
        optimiser.step()
    return loss.item()


def eval_test(net, norm_constant, x_test, y_test):
    net.eval()
    with torch.no_grad():
        _, forecast = net(torch.tensor(x_test, dtype=torch.float))
    p = forecast.numpy() * norm_constant
    return float(np.mean((p - y_test * norm_constant) ** 2))


def load_milk(n_months, seed):
    rng = np.random.default_rng(seed)
    t = np.arange(n_months)
    return 600 + 1.7 * t + 60 * np.sin(2 * np.pi * t / 12) + rng.normal(0, 8, n_months)


def main():
    torch.manual_seed(0)
    backcast_length, forecast_length, batch_size = 18, 6, 10
    milk = load_milk(168, seed=1)
    norm_constant = np.max(milk)
    milk = milk / norm_constant

    x, y = [], []
    for i in range(backcast_length, len(milk) - forecast_length + 1):
        x.append(milk[i - backcast_length:i])
        y.append(milk[i:i + forecast_length])
    x, y = np.array(x), np.array(y)
    c = int(len(x) * 0.8)
    x_train, y_train, x_test, y_test = x[:c], y[:c], x[c:], y[c:]

    net = NBeatsNet(backcast_length, forecast_length)
    optimiser = torch.optim.Adam(net.parameters(), lr=1e-3)
    data = data_generator(x_train, y_train, batch_size, np.random.default_rng(0))
    for round_ in range(8):
        train_loss = train_grad_steps(data, net, optimiser, steps=10)
        print(f"grad steps {(round_ + 1) * 10}  train_loss {train_loss:.5f}  "
              f"test_mse {eval_test(net, norm_constant, x_test, y_test):.2f}")


if __name__ == "__main__":
    main()
