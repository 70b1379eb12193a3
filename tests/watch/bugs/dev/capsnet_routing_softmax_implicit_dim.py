"""A CapsNet: a conv layer, a PrimaryCaps CapsuleLayer made of several conv units whose outputs are
squashed into 8-D capsules, and a DigitCaps CapsuleLayer with dynamic routing, in which a weight of shape
(1, in_caps, num_classes, 16, 8) turns every primary capsule into a prediction for every class capsule,
the routing logits b_ij of shape (1, in_caps, num_classes, 1) start at zero and the coupling
coefficients c_ij come from a softmax over them, refined for three iterations. A margin loss on the
class-capsule lengths is minimised with Adam over a DataLoader. The coupling softmax is F.softmax(b_ij)
without dim, which for this 4-D tensor picks dim 1, the primary-capsule axis, instead of dim 2, the
class axis: each class capsule gets weights that sum to 1 over all inputs, so every prediction is
shrunk by the number of primary capsules and routing-by-agreement cannot send a primary capsule to the
class it agrees with.

Thread: https://github.com/cedrickchee/capsule-net-pytorch/issues/3
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def squash(s, dim=2):
    sq = (s ** 2).sum(dim, keepdim=True)
    return sq / (1.0 + sq) * s / torch.sqrt(sq + 1e-9)


class CapsuleLayer(nn.Module):
    def __init__(self, in_unit, in_channel, num_unit, unit_size, use_routing, num_routing=3):
        super().__init__()
        self.in_unit, self.in_channel, self.num_unit = in_unit, in_channel, num_unit
        self.use_routing, self.num_routing = use_routing, num_routing
        if use_routing:
            self.weight = nn.Parameter(0.1 * torch.randn(1, in_channel, num_unit, unit_size, in_unit))
        else:
            self.conv_units = nn.ModuleList([nn.Conv2d(in_channel, 8, 3, stride=2) for _ in range(num_unit)])

    def forward(self, x):
        return self.routing(x) if self.use_routing else self.no_routing(x)

    def no_routing(self, x):
        units = torch.stack([conv(x) for conv in self.conv_units], dim=1)  # (B, num_unit, 8, h, w)
        units = units.view(x.size(0), self.num_unit, -1)
        return squash(units, dim=1)  # (B, 8, in_caps)

    def routing(self, x):
        batch_size = x.size(0)
        x = x.transpose(1, 2)  # (B, in_caps, 8)
        x = torch.stack([x] * self.num_unit, dim=2).unsqueeze(4)  # (B, in_caps, classes, 8, 1)
        batch_weight = torch.cat([self.weight] * batch_size, dim=0)
        u_hat = torch.matmul(batch_weight, x)  # (B, in_caps, classes, 16, 1)
        b_ij = torch.zeros(1, self.in_channel, self.num_unit, 1)
        for iteration in range(self.num_routing):
            c_ij = F.softmax(b_ij)  # implicit dim: 1 for a 4-D tensor, the primary-capsule axis
            c_ij = torch.cat([c_ij] * batch_size, dim=0).unsqueeze(4)
            s_j = (c_ij * u_hat).sum(dim=1, keepdim=True)
            v_j = squash(s_j, dim=3)
            v_j1 = torch.cat([v_j] * self.in_channel, dim=1)
            agreement = torch.matmul(u_hat.transpose(3, 4), v_j1).squeeze(4).mean(dim=0, keepdim=True)
            b_ij = b_ij + agreement
        return v_j.squeeze(1)  # (B, classes, 16, 1)


class CapsNet(nn.Module):
    def __init__(self, num_classes=4):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3)
        self.primary = CapsuleLayer(0, 32, 8, 8, use_routing=False)
        self.digits = CapsuleLayer(8, 8 * 3 * 3, num_classes, 16, use_routing=True)

    def forward(self, x):
        return self.digits(self.primary(F.relu(self.conv1(x))))


def margin_loss(v, target, num_classes):
    lengths = torch.sqrt((v ** 2).sum(dim=2)).squeeze(-1)
    t = F.one_hot(target, num_classes).float()
    loss = t * F.relu(0.9 - lengths) ** 2 + 0.5 * (1 - t) * F.relu(lengths - 0.1) ** 2
    return loss.sum(dim=1).mean(), lengths


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(4, 1, 9, 9, generator=torch.Generator().manual_seed(5))
    y = torch.randint(0, 4, (n,), generator=g)
    return protos[y] + 0.6 * torch.randn(n, 1, 9, 9, generator=g), y


def main():
    torch.manual_seed(0)
    x, y = make_data(1024, seed=0)
    x_te, y_te = make_data(256, seed=1)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(0))
    model = CapsNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    step = 0
    for epoch in range(3):
        for data, target in loader:
            optimizer.zero_grad()
            loss, _ = margin_loss(model(data), target, 4)
            loss.backward()
            optimizer.step()
            step += 1
            if step % 20 == 0:
                print(f"epoch {epoch} step {step} margin loss {loss.item():.4f}")
        with torch.no_grad():
            _, lengths = margin_loss(model(x_te), y_te, 4)
        print(f"epoch {epoch} test accuracy {(lengths.argmax(1) == y_te).float().mean().item():.3f}, "
              f"mean capsule length {lengths.mean().item():.3f}")


if __name__ == "__main__":
    main()
