"""Continual-learning fine-tuning of a frozen encoder-decoder-style model through side LoRA modules:
a hand-written LoRALayer (lora_A of shape (in_features, r), lora_B of shape (r, out_features),
scaling alpha / r) is added to the query and value projections of every attention block, all base
weights are frozen, and a train loop optimises only the LoRA parameters with AdamW. Both lora_A and
lora_B are created with torch.zeros, so the low-rank update is A @ B = 0 and the gradient of each
factor is proportional to the other one: every LoRA gradient is exactly zero on every step and the
adapters never move from zero, while the loss stays where the frozen model puts it.

Thread: https://github.com/circle-hit/SAPT/issues/11
"""
import torch
import torch.nn.functional as F
from torch import nn


class LoRALayer(nn.Module):
    def __init__(self, in_features, out_features, r=4, lora_alpha=8, lora_dropout=0.0):
        super().__init__()
        self.lora_A = nn.Parameter(torch.zeros((in_features, r)), requires_grad=True)
        self.lora_B = nn.Parameter(torch.zeros((r, out_features)), requires_grad=True)
        self.scaling = lora_alpha / r
        self.lora_dropout = nn.Dropout(lora_dropout) if lora_dropout > 0 else nn.Identity()

    def forward(self, x):
        return (self.lora_dropout(x) @ self.lora_A @ self.lora_B) * self.scaling


class Attention(nn.Module):
    def __init__(self, dim, heads=4):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.lora_q = LoRALayer(dim, dim)
        self.lora_v = LoRALayer(dim, dim)

    def forward(self, x, context):
        b, t, d = x.shape
        q = (self.q(x) + self.lora_q(x)).view(b, t, self.heads, -1).transpose(1, 2)
        k = self.k(context).view(b, context.size(1), self.heads, -1).transpose(1, 2)
        v = (self.v(context) + self.lora_v(context)).view(b, context.size(1), self.heads, -1).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v)
        return self.o(out.transpose(1, 2).reshape(b, t, d))


class Seq2SeqModel(nn.Module):
    def __init__(self, vocab=32, dim=32, n_labels=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.encoder = Attention(dim)
        self.decoder = Attention(dim)
        self.norm = nn.LayerNorm(dim)
        self.query = nn.Parameter(torch.randn(1, 1, dim) * 0.1)
        self.lm_head = nn.Linear(dim, n_labels)

    def forward(self, input_ids, labels=None):
        h = self.embed(input_ids)
        h = self.norm(h + self.encoder(h, h))
        out = self.decoder(self.query.expand(h.size(0), -1, -1), h)[:, 0]
        logits = self.lm_head(out)
        loss = F.cross_entropy(logits, labels) if labels is not None else None
        return loss, logits


def make_task(n, seed, vocab=32, n_labels=8):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, vocab, (n, 12), generator=g)
    y = (x[:, :4].sum(1) + 3 * x[:, -1]) % n_labels  # a new task the frozen model does not solve
    return x, y


def train(model, optimizer, x, y, epochs=4, batch_size=64):
    step = 0
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(len(x))
        for b in range(0, len(x), batch_size):
            idx = perm[b:b + batch_size]
            loss, _ = model(x[idx], y[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % 20 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}")


def main():
    torch.manual_seed(0)
    model = Seq2SeqModel()
    for name, p in model.named_parameters():
        p.requires_grad = "lora_" in name
    trainable = [p for p in model.parameters() if p.requires_grad]
    print(f"trainable parameters: {sum(p.numel() for p in trainable)}")
    optimizer = torch.optim.AdamW(trainable, lr=5e-3)
    x, y = make_task(1600, seed=0)
    train(model, optimizer, x, y)
    lora_norm = sum(float(p.detach().norm()) for p in trainable)
    xv, yv = make_task(400, seed=1)
    model.eval()
    with torch.no_grad():
        acc = (model(xv)[1].argmax(-1) == yv).float().mean().item()
    print(f"total LoRA weight norm after training: {lora_norm:.4f}, held-out accuracy {acc:.3f}")


if __name__ == "__main__":
    main()
