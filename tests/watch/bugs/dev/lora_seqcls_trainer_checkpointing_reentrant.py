"""LoRA fine-tuning of a RoBERTa-style sequence classifier with a Hugging Face style Trainer. The
pretrained encoder (embeddings and layers) is frozen, LoRA adapters sit on the query and value
projections, and the new classification head is trained in full (modules_to_save). To save memory
the user turns on gradient checkpointing twice: model.gradient_checkpointing_enable({"use_reentrant":
False}) and TrainingArguments(gradient_checkpointing=True). Trainer.__init__ enables checkpointing
again from its arguments, and since gradient_checkpointing_kwargs was not passed it falls back to the
reentrant variant. The reentrant checkpoint reconnects a block to the graph only through inputs that
require grad, and the frozen embedding output does not: every LoRA adapter inside the checkpointed
layers gets no gradient and stays at its initial value, and only the classification head learns.

Thread: https://github.com/huggingface/transformers/issues/26221
"""
import math
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

VOCAB, SEQ, DIM, HEADS, LAYERS = 40, 16, 48, 4, 2


class LoraLinear(nn.Module):
    def __init__(self, base, r=8, alpha=16):
        super().__init__()
        self.base_layer = base
        self.lora_A = nn.Parameter(torch.randn(r, base.in_features) / math.sqrt(base.in_features))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r))
        self.scaling = alpha / r

    def forward(self, x):
        return self.base_layer(x) + self.scaling * (x @ self.lora_A.t() @ self.lora_B.t())


class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.query, self.key, self.value = nn.Linear(DIM, DIM), nn.Linear(DIM, DIM), nn.Linear(DIM, DIM)
        self.dense = nn.Linear(DIM, DIM)

    def forward(self, h):
        b, t, _ = h.shape
        split = lambda x: x.view(b, t, HEADS, DIM // HEADS).transpose(1, 2)
        ctx = F.scaled_dot_product_attention(split(self.query(h)), split(self.key(h)), split(self.value(h)))
        return self.dense(ctx.transpose(1, 2).reshape(b, t, DIM))


class EncoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = SelfAttention()
        self.ln1, self.ln2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.ffn = nn.Sequential(nn.Linear(DIM, 2 * DIM), nn.GELU(), nn.Linear(2 * DIM, DIM))

    def forward(self, h):
        h = self.ln1(h + self.attention(h))
        return self.ln2(h + self.ffn(h))


class ClassificationHead(nn.Module):
    def __init__(self, num_labels):
        super().__init__()
        self.dense, self.out_proj = nn.Linear(DIM, DIM), nn.Linear(DIM, num_labels)

    def forward(self, h):
        return self.out_proj(torch.tanh(self.dense(h[:, 0])))


class RobertaForSequenceClassification(nn.Module):
    def __init__(self, num_labels=2):
        super().__init__()
        self.embeddings = nn.Embedding(VOCAB, DIM)
        self.position_embeddings = nn.Embedding(SEQ, DIM)
        self.layer = nn.ModuleList(EncoderLayer() for _ in range(LAYERS))
        self.classifier = ClassificationHead(num_labels)
        self.gradient_checkpointing = False
        self._ckpt_kwargs = {}

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None):
        if gradient_checkpointing_kwargs is None:
            gradient_checkpointing_kwargs = {"use_reentrant": True}
        self.gradient_checkpointing = True
        self._ckpt_kwargs = gradient_checkpointing_kwargs

    def forward(self, input_ids, labels=None):
        h = self.embeddings(input_ids) + self.position_embeddings(torch.arange(input_ids.size(1)))
        for layer in self.layer:
            if self.gradient_checkpointing and self.training:
                h = checkpoint(layer, h, **self._ckpt_kwargs)
            else:
                h = layer(h)
        logits = self.classifier(h)
        loss = F.cross_entropy(logits, labels) if labels is not None else None
        return loss, logits


def get_peft_model(model, target_modules=("query", "value"), modules_to_save=("classifier",)):
    for p in model.parameters():
        p.requires_grad_(False)
    for layer in model.layer:
        for name in target_modules:
            setattr(layer.attention, name, LoraLinear(getattr(layer.attention, name)))
    for name in modules_to_save:
        for p in getattr(model, name).parameters():
            p.requires_grad_(True)
    return model


@dataclass
class TrainingArguments:
    learning_rate: float = 2e-3
    per_device_train_batch_size: int = 32
    num_train_epochs: int = 4
    gradient_checkpointing: bool = False
    gradient_checkpointing_kwargs: Optional[dict] = None
    logging_steps: int = 10


class Trainer:
    def __init__(self, model, args, train_dataset, eval_dataset):
        self.model, self.args = model, args
        self.train_dataset, self.eval_dataset = train_dataset, eval_dataset
        if args.gradient_checkpointing:
            self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=args.gradient_checkpointing_kwargs)
        params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=args.learning_rate, weight_decay=0.01)

    def train(self):
        x, y = self.train_dataset
        g = torch.Generator().manual_seed(1)
        bs, step = self.args.per_device_train_batch_size, 0
        for epoch in range(self.args.num_train_epochs):
            self.model.train()
            order = torch.randperm(len(x), generator=g)
            for i in range(0, len(x), bs):
                idx = order[i:i + bs]
                loss, _ = self.model(x[idx], labels=y[idx])
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()
                step += 1
                if step % self.args.logging_steps == 0:
                    print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
            print(f"epoch {epoch} eval accuracy {self.evaluate():.3f}")

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        x, y = self.eval_dataset
        return (self.model(x)[1].argmax(-1) == y).float().mean().item()


def make_dataset(n, seed):
    """Label 1 when token 7 appears before token 9 in the sequence (both always present)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(10, VOCAB, (n, SEQ), generator=g)
    x[:, 0] = 0
    for i in range(n):
        a, b = (torch.randperm(SEQ - 1, generator=g)[:2] + 1).tolist()
        x[i, a], x[i, b] = 7, 9
    y = (x == 7).float().argmax(1) < (x == 9).float().argmax(1)
    return x, y.long()


def main():
    torch.manual_seed(0)
    model = RobertaForSequenceClassification(num_labels=2)
    model = get_peft_model(model)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    args = TrainingArguments(gradient_checkpointing=True)
    trainer = Trainer(model, args, make_dataset(640, seed=0), make_dataset(256, seed=1))
    trainer.train()
    lora_b = max(m.lora_B.abs().max().item() for m in model.modules() if isinstance(m, LoraLinear))
    print(f"largest |lora_B| after training: {lora_b:.4f}")


if __name__ == "__main__":
    main()
