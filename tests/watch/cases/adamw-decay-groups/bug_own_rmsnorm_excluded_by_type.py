"""A small LLaMA-style decoder whose RMSNorm is the model's own class. The optimizer groups exempt
biases and the parameters of modules that are instances of nn.LayerNorm, the usual list of norm
types, so the RMSNorm gains (initialised to 1) land in the group decayed with weight_decay=0.1."""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, DIM = 64, 48


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(dim)), eps

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.norm1, self.norm2 = RMSNorm(DIM), RMSNorm(DIM)
        self.mix = nn.GRU(DIM, DIM, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(DIM, 2 * DIM, bias=False), nn.SiLU(), nn.Linear(2 * DIM, DIM, bias=False))
        self.final_norm = RMSNorm(DIM)
        self.lm_head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, ids):
        h = self.embed(ids)
        h = h + self.mix(self.norm1(h))[0]
        h = h + self.mlp(self.norm2(h))
        return self.lm_head(self.final_norm(h))


def param_groups(model, weight_decay, norm_types=(nn.LayerNorm,)):
    skip = {id(p) for m in model.modules() if isinstance(m, norm_types) for p in m.parameters(recurse=False)}
    decay = [p for n, p in model.named_parameters() if id(p) not in skip and not n.endswith("bias")]
    no_decay = [p for n, p in model.named_parameters() if id(p) in skip or n.endswith("bias")]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = Decoder()
    optimizer = torch.optim.AdamW(param_groups(model, 0.1), lr=3e-3)
    for step in range(60):
        start = torch.randint(0, VOCAB, (16, 1), generator=g)
        ids = (start + torch.arange(17)) % VOCAB
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
