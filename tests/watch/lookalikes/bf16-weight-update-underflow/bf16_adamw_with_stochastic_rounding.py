"""Healthy look-alike of bf16-weight-update-underflow: pure bfloat16 weights stepped by an AdamW
that rounds stochastically, in the style of low-precision optimizer libraries (its defaults carry
`bf16_stochastic_round=True`): the update is computed in float32 and rounded up or down at random
with the probabilities that keep its expected value, so weights of order 1 move on average even
when each update is smaller than bf16's rounding step."""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, DIM = 96, 64


def round_stochastically(x32):
    """float32 -> bfloat16, rounding up or down at random in proportion to the distance."""
    bits = x32.view(torch.int32)
    noise = torch.randint(0, 1 << 16, bits.shape, dtype=torch.int32, device=x32.device)
    return ((bits + noise) & -65536).view(torch.float32).to(torch.bfloat16)


class StochasticAdamW(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, bf16_stochastic_round=True):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, bf16_stochastic_round=bf16_stochastic_round))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["t"] = 0
                    state["m"] = torch.zeros_like(p, dtype=torch.float32)
                    state["v"] = torch.zeros_like(p, dtype=torch.float32)
                state["t"] += 1
                g = p.grad.float()
                state["m"].mul_(b1).add_(g, alpha=1 - b1)
                state["v"].mul_(b2).addcmul_(g, g, value=1 - b2)
                m_hat = state["m"] / (1 - b1 ** state["t"])
                v_hat = state["v"] / (1 - b2 ** state["t"])
                new = p.float() - group["lr"] * m_hat / (v_hat.sqrt() + group["eps"])
                p.copy_(round_stochastically(new) if group["bf16_stochastic_round"] else new.to(torch.bfloat16))


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.norm = nn.LayerNorm(DIM)
        self.mix = nn.Sequential(nn.Linear(2 * DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM))
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, ids):
        h = self.norm(self.tok(ids))
        prev = torch.cat([torch.zeros_like(h[:, :1]), h[:, :-1]], 1)
        return self.head(h + self.mix(torch.cat([h, prev], -1)))


def make_batch(table, g, n=32, length=24):
    ids = torch.empty(n, length, dtype=torch.long)
    ids[:, 0] = torch.randint(0, VOCAB, (n,), generator=g)
    for t in range(1, length):
        noise = torch.randint(0, VOCAB, (n,), generator=g)
        keep = torch.rand(n, generator=g) < 0.8
        ids[:, t] = torch.where(keep, table[ids[:, t - 1]], noise)
    return ids


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    table = torch.randperm(VOCAB, generator=g)
    model = TinyLM().to(torch.bfloat16)
    optimizer = StochasticAdamW(model.parameters(), lr=2e-4)
    for step in range(120):
        ids = make_batch(table, g)
        loss = F.cross_entropy(model(ids[:, :-1]).float().reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 30 == 0:
            print(f"step {step} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
