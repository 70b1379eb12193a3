"""An ODE-RNN binary classifier over irregularly sampled event sequences: each step has five categorical
features (five nn.Embedding tables, concatenated, then dropout) and a time stamp; between two
observations the hidden state is evolved by an ODE whose derivative is an ODEFunc module (a small
Linear-Tanh-Linear net) integrated with a fixed-step RK4 odeint helper, then a GRUCell folds in the
observation. A linear head and a sigmoid on the last hidden state give the probability, trained with
BCELoss and Adam over model.parameters() in a train(model, optimizer, loader) helper. The GRU update is
written grucell(x_t, hx.detach()): the hidden state coming out of the ODE solve is cut from the graph
at every observation, so the ODEFunc parameters never receive a gradient and keep their initial
values, and the recurrence cannot carry information across steps in the backward pass.

Thread: https://github.com/rtqichen/torchdiffeq/issues/79
"""
import torch
from torch import nn


def odeint(func, y0, t0, t1, n_sub=4):
    """Fixed-step RK4 from t0 to t1 (per-sample times), returns the state at t1."""
    h = ((t1 - t0) / n_sub).unsqueeze(-1)
    y, t = y0, t0
    for _ in range(n_sub):
        k1 = func(t, y)
        k2 = func(t + h.squeeze(-1) / 2, y + h * k1 / 2)
        k3 = func(t + h.squeeze(-1) / 2, y + h * k2 / 2)
        k4 = func(t + h.squeeze(-1), y + h * k3)
        y = y + h * (k1 + 2 * k2 + 2 * k3 + k4) / 6
        t = t + h.squeeze(-1)
    return y


class ODEFunc(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(hidden_size, hidden_size), nn.Tanh(), nn.Linear(hidden_size, hidden_size))
        for m in self.net.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, mean=0, std=0.1)
                nn.init.constant_(m.bias, val=0)

    def forward(self, t, y):
        return self.net(y)


class ODEGRUModel(nn.Module):
    def __init__(self, cards, dims, hidden_size, dropout=0.1):
        super().__init__()
        self.embeds = nn.ModuleList([nn.Embedding(c, d) for c, d in zip(cards, dims)])
        self.dropout = nn.Dropout(dropout)
        self.hidden_size = hidden_size
        self.grucell = nn.GRUCell(sum(dims), hidden_size)
        self.ode_func = ODEFunc(hidden_size)
        self.out = nn.Linear(hidden_size, 1)

    def forward(self, cats, times):
        b, steps, _ = cats.shape
        x = torch.cat([emb(cats[:, :, i]) for i, emb in enumerate(self.embeds)], dim=-1)
        x = self.dropout(x)
        hx = torch.zeros(b, self.hidden_size)
        t_prev = torch.zeros(b)
        for i in range(steps):
            hx = odeint(self.ode_func, hx, t_prev, times[:, i])
            hx = self.grucell(x[:, i], hx.detach())
            t_prev = times[:, i]
        return torch.sigmoid(self.out(hx)).squeeze(-1)


def make_data(g, n, steps, cards):
    cats = torch.stack([torch.randint(0, c, (n, steps), generator=g) for c in cards], dim=-1)
    gaps = torch.rand(n, steps, generator=g) * 0.9 + 0.1
    times = gaps.cumsum(1)
    # label: category 0 of feature 0 seen in the first half, and a sequence longer than the median
    early = (cats[:, : steps // 2, 0] == 0).any(1)
    y = (early & (times[:, -1] > times[:, -1].median())).float()
    return cats, times, y


def train(model, optimizer, loader, criterion):
    model.train()
    total = 0.0
    for cats, times, y in loader:
        optimizer.zero_grad()
        p = model(cats, times)
        loss = criterion(p, y)
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total / len(loader)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    cards, dims, steps = [6, 5, 4, 7, 3], [4, 3, 3, 4, 2], 8
    cats, times, y = make_data(g, 1280, steps, cards)
    model = ODEGRUModel(cards, dims, hidden_size=32)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    criterion = nn.BCELoss()
    before = [p.detach().clone() for p in model.ode_func.parameters()]
    batch = 64
    for epoch in range(4):
        perm = torch.randperm(len(y), generator=g)
        loader = [(cats[perm[i:i + batch]], times[perm[i:i + batch]], y[perm[i:i + batch]])
                  for i in range(0, len(y), batch)]
        loss = train(model, optimizer, loader, criterion)
        print(f"epoch {epoch} train BCE {loss:.4f}")
    moved = sum((a - p.detach()).abs().sum().item() for a, p in zip(before, model.ode_func.parameters()))
    print(f"total change of the ODEFunc weights: {moved:.6f}")


if __name__ == "__main__":
    main()
