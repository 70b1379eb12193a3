"""A graph-transformer regression model in the gt-pyg style (GraphTransformerNet with norm="bn",
a Gaussian mean/log-variance readout and a freeze(components) helper) that is pretrained and then
fine-tuned with its embeddings and encoder frozen. freeze() sets requires_grad=False on the frozen
modules and calls .eval() on their BatchNorm layers once, at the moment it is called. The
fine-tuning loop calls model.train() at the start of every epoch, which recursively puts those
BatchNorm layers back into training mode: the "frozen" encoder normalises with the statistics of
each fine-tuning batch and its running_mean/running_var are overwritten by the new data, so the
encoder no longer computes what was pretrained while get_frozen_status() still reports it frozen.

Thread: https://github.com/pgniewko/gt-pyg/issues/112
"""
import math

import torch
from torch import nn


class GTConv(nn.Module):
    def __init__(self, dim, num_heads=4):
        super().__init__()
        self.h, self.d = num_heads, dim // num_heads
        self.q, self.k, self.v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.o = nn.Linear(dim, dim)
        self.norm1 = nn.BatchNorm1d(dim)
        self.ffn = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.norm2 = nn.BatchNorm1d(dim)

    def forward(self, x, edge_index):
        src, dst = edge_index
        n = x.shape[0]
        q = self.q(x).view(n, self.h, self.d)
        k = self.k(x).view(n, self.h, self.d)
        v = self.v(x).view(n, self.h, self.d)
        score = (q[dst] * k[src]).sum(-1) / math.sqrt(self.d)  # E, H
        smax = torch.full((n, self.h), -1e9).scatter_reduce(0, dst.unsqueeze(1).expand_as(score), score, "amax")
        w = torch.exp(score - smax[dst])
        denom = torch.zeros(n, self.h).index_add(0, dst, w)
        w = w / (denom[dst] + 1e-9)
        agg = torch.zeros(n, self.h, self.d).index_add(0, dst, w.unsqueeze(-1) * v[src])
        x = self.norm1(x + self.o(agg.reshape(n, -1)))
        return self.norm2(x + self.ffn(x))


class GraphTransformerNet(nn.Module):
    def __init__(self, node_dim_in=6, hidden_dim=32, num_gt_layers=2, num_tasks=1):
        super().__init__()
        self.node_emb = nn.Linear(node_dim_in, hidden_dim, bias=False)
        self.input_norm = nn.BatchNorm1d(hidden_dim)
        self.gt_layers = nn.ModuleList([GTConv(hidden_dim) for _ in range(num_gt_layers)])
        self.readout_norm = nn.BatchNorm1d(hidden_dim)
        self.mu_mlp = nn.Sequential(nn.Linear(hidden_dim, hidden_dim), nn.GELU(), nn.Linear(hidden_dim, num_tasks))
        self.log_var_mlp = nn.Sequential(nn.Linear(hidden_dim, hidden_dim), nn.GELU(), nn.Linear(hidden_dim, num_tasks))

    def forward(self, x, edge_index, batch, num_graphs):
        h = self.input_norm(self.node_emb(x))
        for layer in self.gt_layers:
            h = layer(h, edge_index)
        g = torch.zeros(num_graphs, h.shape[1]).index_add(0, batch, h)
        g = self.readout_norm(g)
        mu = self.mu_mlp(g)
        log_var = torch.clamp(self.log_var_mlp(g), -10.0, 10.0)
        pred = mu + torch.exp(0.5 * log_var) * torch.randn_like(mu) if self.training else mu
        return pred, mu, log_var

    def _get_component_modules(self, name):
        encoder = [self.input_norm] + list(self.gt_layers)
        return {"embeddings": [self.node_emb], "encoder": encoder,
                "heads": [self.readout_norm, self.mu_mlp, self.log_var_mlp]}[name]

    def _set_requires_grad(self, modules, requires_grad):
        for module in modules:
            for param in module.parameters():
                param.requires_grad = requires_grad
            for m in module.modules():
                if isinstance(m, nn.BatchNorm1d):
                    m.train() if requires_grad else m.eval()

    def freeze(self, components):
        for comp in components:
            self._set_requires_grad(self._get_component_modules(comp), requires_grad=False)
        return self

    def get_frozen_status(self):
        return {name: all(not p.requires_grad for m in self._get_component_modules(name) for p in m.parameters())
                for name in ["embeddings", "encoder", "heads"]}


def make_batch(gen, num_graphs=16, shift=0.0, scale=1.0):
    xs, edges, batch, ys, offset = [], [], [], [], 0
    w = torch.tensor([1.0, -0.5, 0.8, 0.0, 0.3, -1.0])
    for g in range(num_graphs):
        n = int(torch.randint(5, 11, (1,), generator=gen))
        x = shift + scale * torch.randn(n, 6, generator=gen)
        src = torch.arange(n)
        dst = (src + 1) % n
        extra = torch.randint(0, n, (2, n), generator=gen)
        e = torch.cat([torch.stack([src, dst]), torch.stack([dst, src]), extra, torch.stack([src, src])], dim=1)
        xs.append(x)
        edges.append(e + offset)
        batch.append(torch.full((n,), g))
        ys.append(torch.tanh(x @ w / 2).sum() / math.sqrt(n) + 0.1 * x[:, 3].mean())
        offset += n
    return torch.cat(xs), torch.cat(edges, dim=1), torch.cat(batch), torch.stack(ys).unsqueeze(1), num_graphs


def gaussian_nll(mu, log_var, y):
    return (0.5 * (log_var + (y - mu) ** 2 / torch.exp(log_var))).mean()


def run_epoch(model, optimizer, batches):
    total = 0.0
    for x, ei, b, y, ng in batches:
        _, mu, log_var = model(x, ei, b, ng)
        loss = gaussian_nll(mu, log_var, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total / len(batches)


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    model = GraphTransformerNet()
    pretrain = [make_batch(gen) for _ in range(20)]
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)
    for epoch in range(3):
        model.train()
        print(f"pretrain epoch {epoch}  nll {run_epoch(model, optimizer, pretrain):.4f}")

    pretrained_mean = model.input_norm.running_mean.clone()
    model.freeze(["embeddings", "encoder"])
    print(f"after freeze(): input_norm.training={model.input_norm.training}  status={model.get_frozen_status()}")
    finetune = [make_batch(gen, shift=0.8, scale=1.5) for _ in range(20)]
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-3)
    for epoch in range(4):
        model.train()
        nll = run_epoch(model, optimizer, finetune)
        drift = (model.input_norm.running_mean - pretrained_mean).abs().max().item()
        print(f"finetune epoch {epoch}  nll {nll:.4f}  input_norm.training={model.input_norm.training}  "
              f"running_mean drift {drift:.3f}")


if __name__ == "__main__":
    main()
