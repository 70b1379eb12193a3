"""Pretraining a small mixture-of-experts causal LM written in the Hugging Face style: a
JetMoeForCausalLM-like class (decoder blocks with a top-2 routed expert MLP, an lm_head, and a
loss_function attribute that is the library's causal-LM loss, which pads the labels with -100 and
shifts them by one itself), fed by a language-modelling collator with labels = input_ids and driven
by a small Trainer (AdamW, linear warmup/decay, clipping at 1.0). The model's forward already
shifts: it takes logits[..., :-1] and labels[..., 1:], flattens both, and passes them to
loss_function, which shifts again. Every position is trained to predict the token two steps ahead
(and across the flattened rows, the last position of a row is scored against the next row), so the
loss settles at the floor of that harder task and next-token prediction is never trained.

Thread: https://github.com/huggingface/transformers/pull/37830
"""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

VOCAB, SEQ = 40, 32


def ForCausalLMLoss(logits, labels, vocab_size, num_items_in_batch=None, ignore_index=-100, shift_labels=None, **kwargs):
    logits = logits.float()
    if shift_labels is None:
        labels = F.pad(labels, (0, 1), value=ignore_index)
        shift_labels = labels[..., 1:].contiguous()
    logits = logits.view(-1, vocab_size)
    shift_labels = shift_labels.view(-1)
    reduction = "sum" if num_items_in_batch is not None else "mean"
    loss = F.cross_entropy(logits, shift_labels, ignore_index=ignore_index, reduction=reduction)
    if num_items_in_batch is not None:
        loss = loss / num_items_in_batch
    return loss


class JetMoeConfig:
    vocab_size = VOCAB
    hidden_size = 64
    num_hidden_layers = 2
    num_attention_heads = 4
    num_local_experts = 4
    num_experts_per_tok = 2
    max_position_embeddings = 64


class JetMoeMoE(nn.Module):
    def __init__(self, config):
        super().__init__()
        d = config.hidden_size
        self.top_k = config.num_experts_per_tok
        self.router = nn.Linear(d, config.num_local_experts, bias=False)
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(d, 2 * d), nn.SiLU(), nn.Linear(2 * d, d)) for _ in range(config.num_local_experts))

    def forward(self, x):
        weights, idx = self.router(x).topk(self.top_k, dim=-1)
        weights = weights.softmax(-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            gate = (weights * (idx == e)).sum(-1, keepdim=True)
            out = out + gate * expert(x)
        return out


class JetMoeBlock(nn.Module):
    def __init__(self, config):
        super().__init__()
        d = config.hidden_size
        self.input_layernorm = nn.LayerNorm(d)
        self.self_attention = nn.MultiheadAttention(d, config.num_attention_heads, batch_first=True)
        self.post_attention_layernorm = nn.LayerNorm(d)
        self.mlp = JetMoeMoE(config)

    def forward(self, x, mask):
        h = self.input_layernorm(x)
        x = x + self.self_attention(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.post_attention_layernorm(x))


class JetMoeModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.embed_positions = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.layers = nn.ModuleList(JetMoeBlock(config) for _ in range(config.num_hidden_layers))
        self.norm = nn.LayerNorm(config.hidden_size)

    def forward(self, input_ids):
        t = input_ids.size(1)
        x = self.embed_tokens(input_ids) + self.embed_positions(torch.arange(t))
        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)


class JetMoeForCausalLM(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.model = JetMoeModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.loss_function = ForCausalLMLoss

    def forward(self, input_ids, attention_mask=None, labels=None, **kwargs):
        logits = self.lm_head(self.model(input_ids))
        loss = None
        if labels is not None:
            logits = logits.float()
            shift_logits = logits[..., :-1, :].contiguous()
            shift_labels = labels[..., 1:].contiguous()
            shift_logits = shift_logits.view(-1, self.config.vocab_size)
            shift_labels = shift_labels.view(-1)
            loss = self.loss_function(shift_logits, shift_labels, vocab_size=self.config.vocab_size, **kwargs)
        return {"loss": loss, "logits": logits}


class StreamDataset(Dataset):
    """Windows of a stream where each token is a fixed function of the previous one, 20% restarts."""

    def __init__(self, n_windows, seed):
        g = torch.Generator().manual_seed(seed)
        succ = torch.randperm(VOCAB, generator=torch.Generator().manual_seed(7))
        out = [int(torch.randint(VOCAB, (1,), generator=g))]
        for _ in range(n_windows * SEQ - 1):
            out.append(int(torch.randint(VOCAB, (1,), generator=g)) if torch.rand(1, generator=g) < 0.2
                       else int(succ[out[-1]]))
        self.data = torch.tensor(out).view(n_windows, SEQ)

    def __len__(self):
        return self.data.size(0)

    def __getitem__(self, i):
        return {"input_ids": self.data[i]}


def data_collator_for_language_modeling(features):
    input_ids = torch.stack([f["input_ids"] for f in features])
    return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids), "labels": input_ids.clone()}


class Trainer:
    def __init__(self, model, train_dataset, batch_size=32, learning_rate=3e-3, num_train_epochs=3, warmup_steps=10):
        self.model = model
        self.loader = DataLoader(train_dataset, batch_size=batch_size, shuffle=True,
                                 collate_fn=data_collator_for_language_modeling,
                                 generator=torch.Generator().manual_seed(0))
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.0)
        total = num_train_epochs * len(self.loader)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: (s + 1) / warmup_steps if s < warmup_steps else max(0.0, (total - s) / (total - warmup_steps)))
        self.epochs = num_train_epochs

    def training_step(self, inputs):
        loss = self.model(**inputs)["loss"]
        loss.backward()
        return loss.detach()

    def train(self):
        step = 0
        for epoch in range(self.epochs):
            self.model.train()
            for inputs in self.loader:
                loss = self.training_step(inputs)
                nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.optimizer.step()
                self.scheduler.step()
                self.optimizer.zero_grad()
                step += 1
                if step % 20 == 0:
                    print(f"epoch {epoch} step {step} loss {loss.item():.4f}")


def main():
    torch.manual_seed(0)
    model = JetMoeForCausalLM(JetMoeConfig())
    Trainer(model, StreamDataset(800, seed=0)).train()
    model.eval()
    ids = StreamDataset(50, seed=1).data
    with torch.no_grad():
        logits = model(ids)["logits"][:, :-1]
    nll = F.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1)).item()
    print(f"held-out next-token loss {nll:.3f} (perplexity {math.exp(nll):.1f})")


if __name__ == "__main__":
    main()
