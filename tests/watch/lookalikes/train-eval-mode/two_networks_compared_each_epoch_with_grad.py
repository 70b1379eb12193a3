"""Two regressors, one with BatchNorm and one without, trained side by side on the same batches,
each by its own Adam optimizer. At the start of every epoch each network is put in eval mode, run on
the test inputs (with grad enabled: the loss is read with .item()) and put back in training mode;
then, batch by batch, each network takes its own training step in turn. Between the second
network's evaluation and its own training forward the first network's optimizer steps; no network
is ever trained in eval mode."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self, batch_norm):
        super().__init__()
        norm = nn.BatchNorm1d if batch_norm else (lambda n: nn.Identity())
        self.body = nn.Sequential(nn.Linear(1, 24), norm(24), nn.Tanh(), nn.Linear(24, 24), norm(24), nn.Tanh())
        self.out = nn.Linear(24, 1)

    def forward(self, x):
        return self.out(self.body(x))


def main():
    torch.manual_seed(0)
    x = torch.linspace(-7, 10, 2000).unsqueeze(1)
    y = x.pow(2) - 5 + 2 * torch.randn(x.shape)
    test_x = torch.linspace(-7, 10, 200).unsqueeze(1)
    test_y = test_x.pow(2) - 5
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)
    nets = [Net(False), Net(True)]
    opts = [torch.optim.Adam(net.parameters(), lr=0.02) for net in nets]
    loss_func = nn.MSELoss()
    history = [[], []]
    for epoch in range(8):
        for net, h in zip(nets, history):
            net.eval()
            h.append(loss_func(net(test_x), test_y).item())
            net.train()
        for b_x, b_y in loader:
            for net, opt in zip(nets, opts):
                loss = loss_func(net(b_x), b_y)
                opt.zero_grad()
                loss.backward()
                opt.step()
        print(f"epoch {epoch}: test mse without BN {history[0][-1]:.1f}, with BN {history[1][-1]:.1f}")


if __name__ == "__main__":
    main()
