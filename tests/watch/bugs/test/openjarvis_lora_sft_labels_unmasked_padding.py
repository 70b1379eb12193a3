"""A LoRA supervised fine-tuning trainer for a local assistant model: LoRATrainer freezes the base
causal LM, wraps its attention and MLP projections in LoRA adapters, tokenizes each prompt/answer
pair with padding="max_length" (the tokenizer has no pad token, so pad_token = eos_token) and calls
model(input_ids=..., attention_mask=..., labels=input_ids). The labels are never masked where
attention_mask is 0, so with short examples most loss terms are "predict eos at a padded
position": the gradient on the real answer tokens is diluted and the reported loss is misleadingly
low.

Thread: https://github.com/open-jarvis/OpenJarvis/pull/521
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

CHARS = "abcdefghijklmnopqrstuvwxyz:? \n"


class CharTokenizer:
    bos_token_id, eos_token_id = 1, 2

    def __init__(self):
        self.pad_token_id = None
        self.vocab_size = len(CHARS) + 3

    def __call__(self, texts, max_length, padding="max_length"):
        ids = [[self.bos_token_id] + [CHARS.index(c) + 3 for c in t] + [self.eos_token_id] for t in texts]
        ids = [x[:max_length] for x in ids]
        input_ids = torch.full((len(ids), max_length), self.pad_token_id)
        attention_mask = torch.zeros(len(ids), max_length, dtype=torch.long)
        for i, x in enumerate(ids):
            input_ids[i, :len(x)] = torch.tensor(x)
            attention_mask[i, :len(x)] = 1
        return {"input_ids": input_ids, "attention_mask": attention_mask}


class LoRALinear(nn.Module):
    def __init__(self, base, r=8, alpha=16):
        super().__init__()
        self.base = base
        self.lora_A = nn.Parameter(torch.randn(r, base.in_features) / math.sqrt(base.in_features))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r))
        self.scaling = alpha / r

    def forward(self, x):
        return self.base(x) + (x @ self.lora_A.t() @ self.lora_B.t()) * self.scaling


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.q_proj, self.k_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.v_proj, self.o_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.up_proj, self.down_proj = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x, attention_mask):
        b, t, d = x.shape
        h = self.norm1(x)
        q, k, v = (p(h).view(b, t, self.heads, -1).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        allowed = torch.ones(t, t, dtype=torch.bool).tril()[None, None] & attention_mask[:, None, None, :].bool()
        allowed = allowed | torch.eye(t, dtype=torch.bool)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        x = x + self.o_proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.down_proj(F.gelu(self.up_proj(self.norm2(x))))


class CausalLM(nn.Module):
    def __init__(self, vocab_size, dim=64, layers=2, heads=4, max_len=64):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab_size, dim)
        self.embed_positions = nn.Embedding(max_len, dim)
        self.layers = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab_size, bias=False)

    def forward(self, input_ids, attention_mask, labels=None):
        x = self.embed_tokens(input_ids) + self.embed_positions(torch.arange(input_ids.size(1)))
        for layer in self.layers:
            x = layer(x, attention_mask)
        logits = self.lm_head(self.norm(x))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1),
                                   ignore_index=-100)
        return loss, logits


class LoRATrainer:
    def __init__(self, model, tokenizer, target_modules=("q_proj", "v_proj", "up_proj", "down_proj"),
                 max_length=48, lr=2e-3, batch_size=16, epochs=2):
        self.model, self.tokenizer = model, tokenizer
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token_id = tokenizer.eos_token_id
        for p in model.parameters():
            p.requires_grad_(False)
        for layer in model.layers:
            for name in target_modules:
                setattr(layer, name, LoRALinear(getattr(layer, name)))
        self.max_length, self.batch_size, self.epochs = max_length, batch_size, epochs
        self.optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)

    def train(self, pairs):
        g = torch.Generator().manual_seed(0)
        step = 0
        for epoch in range(self.epochs):
            self.model.train()
            order = torch.randperm(len(pairs), generator=g).tolist()
            for b in range(0, len(order), self.batch_size):
                texts = [pairs[i][0] + pairs[i][1] for i in order[b:b + self.batch_size]]
                enc = self.tokenizer(texts, max_length=self.max_length, padding="max_length")
                input_ids, attention_mask = enc["input_ids"], enc["attention_mask"]
                loss, _ = self.model(input_ids=input_ids, attention_mask=attention_mask, labels=input_ids)
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()
                step += 1
                if step % 20 == 0:
                    print(f"epoch {epoch} step {step} loss {loss.item():.4f}")


def make_pairs(n, seed):
    g = torch.Generator().manual_seed(seed)
    pairs = []
    for _ in range(n):
        k = int(torch.randint(3, 7, (1,), generator=g))
        word = "".join(CHARS[int(i)] for i in torch.randint(0, 26, (k,), generator=g))
        pairs.append((f"q: {word}?\na:", f" {word}"))
    return pairs


def main():
    torch.manual_seed(0)
    tokenizer = CharTokenizer()
    model = CausalLM(tokenizer.vocab_size)
    trainer = LoRATrainer(model, tokenizer)
    trainer.train(make_pairs(800, seed=0))


if __name__ == "__main__":
    main()
