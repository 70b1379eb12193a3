"""A single-layer Tempotron spiking classifier on small gray images: every pixel is encoded by a
Gaussian tuning-curve encoder into the firing times of m input neurons (a strong response fires early,
a weak one not at all, marked -1); the Tempotron module turns each input spike into a double-exponential
postsynaptic potential over T time steps, weights them with a bias-free Linear layer and returns the
peak voltage of each of the 10 output neurons. The loss is the Tempotron MSE on the neurons that are on
the wrong side of the threshold (the label neuron below it, the others above it), SGD over
net.parameters(); the epoch loop encodes a batch, runs the net, backward, step, then tests under
net.eval() and torch.no_grad(). The batch loop never calls optimizer.zero_grad(), so every SGD step
applies the sum of all gradients since the start of training.

Thread: https://github.com/fangwei123456/spikingjelly/pull/105
"""
import math

import torch
from torch import nn


class GaussianTuning:
    def __init__(self, m, x_min=0.0, x_max=1.0, min_response=0.2):
        self.mu = torch.linspace(x_min, x_max, m)
        self.sigma = (x_max - x_min) / (m - 1) / 1.5
        self.min_response = min_response

    def encode(self, x, T):
        # x: [batch, pixels] in [0, 1] -> spike times [batch, pixels * m], -1 for no spike
        resp = torch.exp(-((x.unsqueeze(-1) - self.mu) ** 2) / (2 * self.sigma ** 2))
        times = torch.round((1.0 - resp) * (T - 1))
        times[resp < self.min_response] = -1.0
        return times.view(x.shape[0], -1)


class Tempotron(nn.Module):
    def __init__(self, in_features, out_features, T, tau=15.0, tau_s=15.0 / 4, v_threshold=1.0):
        super().__init__()
        self.tau, self.tau_s, self.T, self.v_threshold = tau, tau_s, T, v_threshold
        self.fc = nn.Linear(in_features, out_features, bias=False)
        t_peak = tau * tau_s * math.log(tau / tau_s) / (tau - tau_s)
        self.v0 = v_threshold / (math.exp(-t_peak / tau) - math.exp(-t_peak / tau_s))

    def psp(self, t):
        return (torch.exp(-t / self.tau) - torch.exp(-t / self.tau_s)) * (t >= 0).float()

    @staticmethod
    def mse_loss(v_max, v_threshold, label, num_classes):
        wrong = ((v_max >= v_threshold).float() != nn.functional.one_hot(label, num_classes).float()).float()
        return torch.sum(((v_max - v_threshold) * wrong) ** 2) / label.shape[0]

    def forward(self, in_spikes):
        t = torch.arange(self.T, dtype=torch.float32).view(1, 1, -1)
        s = in_spikes.unsqueeze(-1)
        v_in = self.v0 * self.psp(t - s) * (s >= 0).float()  # [B, in, T]
        v_out = self.fc(v_in.permute(0, 2, 1)).permute(0, 2, 1)  # [B, out, T]
        return v_out.max(dim=2).values


class Net(nn.Module):
    def __init__(self, n_pixels, m, T):
        super().__init__()
        self.tempotron = Tempotron(n_pixels * m, 10, T)

    def forward(self, x):
        return self.tempotron(x)


def make_images(g, n, protos, noise=0.3):
    y = torch.randint(0, 10, (n,), generator=g)
    x = (protos[y] + noise * torch.randn(n, protos.shape[1], generator=g)).clamp(0, 1)
    return x, y


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    n_pixels, m, T, batch_size, lr = 64, 4, 30, 64, 0.1
    base = torch.rand(1, n_pixels, generator=g)
    protos = (base + 0.6 * (torch.rand(10, n_pixels, generator=g) - 0.5)).clamp(0, 1)
    x_train, y_train = make_images(g, 2048, protos)
    x_test, y_test = make_images(g, 512, protos)
    encoder = GaussianTuning(m)
    net = Net(n_pixels, m, T)
    optimizer = torch.optim.SGD(net.parameters(), lr=lr)

    train_times = 0
    for epoch in range(4):
        net.train()
        correct, seen = 0, 0
        perm = torch.randperm(len(y_train), generator=g)
        for i in range(0, len(perm), batch_size):
            idx = perm[i:i + batch_size]
            in_spikes = encoder.encode(x_train[idx], T)
            label = y_train[idx]
            v_max = net(in_spikes)
            loss = Tempotron.mse_loss(v_max, net.tempotron.v_threshold, label, 10)
            loss.backward()
            optimizer.step()
            correct += (v_max.argmax(1) == label).sum().item()
            seen += label.numel()
            train_times += 1
        net.eval()
        with torch.no_grad():
            v_max = net(encoder.encode(x_test, T))
            test_acc = (v_max.argmax(1) == y_test).float().mean().item()
        print(f"epoch {epoch}: train_acc={correct / seen:.3f} test_acc={test_acc:.3f} steps={train_times}")


if __name__ == "__main__":
    main()
