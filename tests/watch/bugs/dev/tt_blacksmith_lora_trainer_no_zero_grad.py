"""A Trainer class for LoRA fine-tuning of a small frozen causal LM whose train_step() calls
backward() and optimizer.step() but never clears the gradients, so each step applies the sum of
all the adapter gradients seen so far.

Thread: https://github.com/tenstorrent/tt-blacksmith/pull/711
"""
import torch
import torch.nn.functional as F
from torch import nn


class LoRALinear(nn.Module):
    def __init__(self, base, r=4, alpha=8):
        super().__init__()
        self.base = base
        self.lora_a = nn.Parameter(torch.randn(r, base.in_features) * 0.01)
        self.lora_b = nn.Parameter(torch.zeros(base.out_features, r))
        self.scale = alpha / r

    def forward(self, x):
        return self.base(x) + self.scale * (x @ self.lora_a.t() @ self.lora_b.t())


class TinyLM(nn.Module):
    def __init__(self, vocab=64, dim=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.q_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)
        self.lm_head = nn.Linear(dim, vocab)

    def forward(self, ids):
        h = self.embed(ids)
        h = h + torch.tanh(self.v_proj(torch.tanh(self.q_proj(h))))
        return self.lm_head(h)


def apply_lora(model, targets=("q_proj", "v_proj")):
    for p in model.parameters():
        p.requires_grad_(False)
    for name in targets:
        setattr(model, name, LoRALinear(getattr(model, name)))
    return model


class Trainer:
    def __init__(self, model, config):
        self.model = model
        self.config = config
        trainable = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(trainable, lr=config["lr"])

    def compute_loss(self, batch):
        logits = self.model(batch[:, :-1])
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1))

    def train_step(self, batch):
        self.model.train()
        loss = self.compute_loss(batch)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def train(self, batches):
        for step, batch in enumerate(batches):
            loss = self.train_step(batch)
            if step % 20 == 0:
                print(f"step {step} loss {loss:.4f}")


def token_batches(steps, g, vocab=64):
    for _ in range(steps):
        start = torch.randint(0, vocab, (16, 1), generator=g)
        yield (start + 3 * torch.arange(17)) % vocab  # a fixed stride pattern to learn


def main():
    torch.manual_seed(0)
    model = apply_lora(TinyLM())
    Trainer(model, {"lr": 1e-2}).train(token_batches(100, torch.Generator().manual_seed(0)))


if __name__ == "__main__":
    main()
