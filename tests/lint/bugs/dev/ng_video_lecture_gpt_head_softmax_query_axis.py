"""
Shape: A single-file character GPT: module-level hyperparameters, a batch sampler taking the split
name, a no_grad loss estimator that flips eval/train, head / multi-head / block modules with a causal
tril buffer, a language model that computes F.cross_entropy inside forward, and a flat AdamW loop at
module level.
Bug: the causal attention weights of shape (B, T, T) are normalised with softmax over dim=-2 (the
query axis) instead of dim=-1 (the key axis), so rows are not distributions over past tokens; train
and val loss drop suspiciously low while generations are garbage.
Thread: https://github.com/karpathy/ng-video-lecture/issues/42
"""
import torch
from torch import nn
import torch.nn.functional as F

BATCH = 64
CTX = 256
STEPS = 5000
EVAL_EVERY = 500
LR = 3e-4
DEV = torch.device('cuda') if torch.cuda.is_available() else torch.device('cpu')
EVAL_BATCHES = 200
WIDTH = 384
HEADS = 6
DEPTH = 6
P_DROP = 0.2

torch.manual_seed(0)

with open('input.txt', encoding='utf-8') as fh:
    corpus = fh.read()
alphabet = sorted(set(corpus))
n_vocab = len(alphabet)
char_to_id = {c: i for i, c in enumerate(alphabet)}
ids = torch.tensor([char_to_id[c] for c in corpus], dtype=torch.long)
cut = int(len(ids) * 0.9)
splits = {'train': ids[:cut], 'val': ids[cut:]}


def sample_batch(name):
    src = splits[name]
    starts = torch.randint(len(src) - CTX, (BATCH,))
    xb = torch.stack([src[s:s + CTX] for s in starts])
    yb = torch.stack([src[s + 1:s + CTX + 1] for s in starts])
    return xb.to(DEV), yb.to(DEV)


@torch.no_grad()
def measure():
    result = {}
    net.eval()
    for name in ('train', 'val'):
        vals = torch.zeros(EVAL_BATCHES)
        for i in range(EVAL_BATCHES):
            xb, yb = sample_batch(name)
            vals[i] = net(xb, yb)[1].item()
        result[name] = vals.mean()
    net.train()
    return result


class AttnHead(nn.Module):
    def __init__(self, hs):
        super().__init__()
        self.k = nn.Linear(WIDTH, hs, bias=False)
        self.q = nn.Linear(WIDTH, hs, bias=False)
        self.v = nn.Linear(WIDTH, hs, bias=False)
        self.register_buffer('causal', torch.tril(torch.ones(CTX, CTX)))
        self.drop = nn.Dropout(P_DROP)

    def forward(self, h):
        B, T, C = h.shape
        scores = self.q(h) @ self.k(h).transpose(-2, -1) * C ** -0.5
        scores = scores.masked_fill(self.causal[:T, :T] == 0, float('-inf'))
        weights = F.softmax(scores, dim=-2)
        weights = self.drop(weights)
        return weights @ self.v(h)


class MultiHead(nn.Module):
    def __init__(self, n, hs):
        super().__init__()
        self.heads = nn.ModuleList(AttnHead(hs) for _ in range(n))
        self.out = nn.Linear(WIDTH, WIDTH)
        self.drop = nn.Dropout(P_DROP)

    def forward(self, h):
        return self.drop(self.out(torch.cat([hd(h) for hd in self.heads], dim=-1)))


class MLP(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.seq = nn.Sequential(nn.Linear(w, 4 * w), nn.ReLU(), nn.Linear(4 * w, w), nn.Dropout(P_DROP))

    def forward(self, h):
        return self.seq(h)


class Layer(nn.Module):
    def __init__(self, w, n):
        super().__init__()
        self.attn = MultiHead(n, w // n)
        self.mlp = MLP(w)
        self.norm_a = nn.LayerNorm(w)
        self.norm_b = nn.LayerNorm(w)

    def forward(self, h):
        h = h + self.attn(self.norm_a(h))
        return h + self.mlp(self.norm_b(h))


class CharGPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(n_vocab, WIDTH)
        self.pos = nn.Embedding(CTX, WIDTH)
        self.layers = nn.Sequential(*[Layer(WIDTH, HEADS) for _ in range(DEPTH)])
        self.norm = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, n_vocab)

    def forward(self, idx, tgt=None):
        T = idx.shape[1]
        h = self.tok(idx) + self.pos(torch.arange(T, device=DEV))
        logits = self.head(self.norm(self.layers(h)))
        if tgt is None:
            return logits, None
        flat = logits.reshape(-1, logits.size(-1))
        return logits, F.cross_entropy(flat, tgt.reshape(-1))


net = CharGPT().to(DEV)
opt = torch.optim.AdamW(net.parameters(), lr=LR)

for it in range(STEPS):
    if it % EVAL_EVERY == 0 or it == STEPS - 1:
        stats = measure()
        print(it, float(stats['train']), float(stats['val']))
    xb, yb = sample_batch('train')
    _, loss = net(xb, yb)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
