"""Causal language-model fine-tuning through a Hugging Face-style Trainer with
label_smoothing_factor=0.1. The model (GPT-2 style) shifts its labels itself when it computes its own
loss, but with a label smoother set, Trainer.compute_loss pops "labels" from the batch, calls the
model without them and hands the raw logits and the unshifted labels to the LabelSmoother. The logits
at position t are therefore scored against the token at position t, which is already in the input:
the model learns to copy its current token, the training loss falls far below what next-token
prediction allows, and next-token accuracy stays poor.

Thread: https://github.com/huggingface/transformers/pull/17987
"""
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

VOCAB, SEQ = 40, 24


@dataclass
class TrainingArguments:
    learning_rate: float = 2e-3
    num_train_epochs: int = 3
    per_device_train_batch_size: int = 16
    label_smoothing_factor: float = 0.1
    max_grad_norm: float = 1.0
    logging_steps: int = 10


@dataclass
class LabelSmoother:
    epsilon: float = 0.1
    ignore_index: int = -100

    def __call__(self, model_output, labels):
        logp = F.log_softmax(model_output["logits"], dim=-1)
        keep = labels != self.ignore_index
        safe = labels.clamp(min=0).unsqueeze(-1)
        nll = -logp.gather(-1, safe).squeeze(-1)[keep].mean()
        uniform = -logp.mean(dim=-1)[keep].mean()
        return (1 - self.epsilon) * nll + self.epsilon * uniform


class GPT2LMHeadModel(nn.Module):
    def __init__(self, dim=64, layers=2):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, dim), nn.Embedding(SEQ, dim)
        block = nn.TransformerEncoderLayer(dim, 4, 4 * dim, dropout=0.0, batch_first=True, norm_first=True)
        self.h = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, input_ids, labels=None):
        T = input_ids.size(1)
        mask = nn.Transformer.generate_square_subsequent_mask(T)
        h = self.h(self.wte(input_ids) + self.wpe.weight[:T], mask=mask, is_causal=True)
        logits = self.lm_head(self.ln_f(h))
        out = {"logits": logits}
        if labels is not None:  # the model's own loss shifts: position t predicts token t + 1
            out["loss"] = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1))
        return out


def data_collator(examples):
    input_ids = torch.stack(examples)
    return {"input_ids": input_ids, "labels": input_ids.clone()}


class Trainer:
    def __init__(self, model, args, train_dataset, data_collator):
        self.model, self.args, self.train_dataset, self.data_collator = model, args, train_dataset, data_collator
        self.label_smoother = LabelSmoother(args.label_smoothing_factor) if args.label_smoothing_factor else None

    def compute_loss(self, model, inputs):
        labels = inputs.pop("labels") if self.label_smoother is not None and "labels" in inputs else None
        outputs = model(**inputs)
        return self.label_smoother(outputs, labels) if labels is not None else outputs["loss"]

    def train(self):
        args, model = self.args, self.model
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=0.0)
        g = torch.Generator().manual_seed(1)
        step = 0
        for epoch in range(args.num_train_epochs):
            model.train()
            order = torch.randperm(len(self.train_dataset), generator=g).tolist()
            for b in range(0, len(order), args.per_device_train_batch_size):
                inputs = self.data_collator([self.train_dataset[i] for i in order[b:b + args.per_device_train_batch_size]])
                loss = self.compute_loss(model, inputs)
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                optimizer.step()
                optimizer.zero_grad()
                step += 1
                if step % args.logging_steps == 0:
                    print(f"epoch {epoch} step {step} loss {loss.item():.4f}")


def markov_sequences(n, seed):
    g = torch.Generator().manual_seed(seed)
    nxt = torch.randint(0, VOCAB, (VOCAB, 2), generator=torch.Generator().manual_seed(7))
    seq = torch.empty(n, SEQ, dtype=torch.long)
    seq[:, 0] = torch.randint(0, VOCAB, (n,), generator=g)
    for t in range(1, SEQ):
        seq[:, t] = nxt[seq[:, t - 1], torch.randint(0, 2, (n,), generator=g)]
    return list(seq)


def main():
    torch.manual_seed(0)
    model = GPT2LMHeadModel()
    trainer = Trainer(model, TrainingArguments(), markov_sequences(480, seed=0), data_collator)
    trainer.train()
    model.eval()
    with torch.no_grad():
        held_out = torch.stack(markov_sequences(200, seed=1))
        out = model(held_out, labels=held_out)
        acc = (out["logits"][:, :-1].argmax(-1) == held_out[:, 1:]).float().mean()
    print(f"held-out next-token loss {out['loss'].item():.3f} (best possible {torch.log(torch.tensor(2.0)):.3f}), "
          f"next-token accuracy {acc:.3f}")


if __name__ == "__main__":
    main()
