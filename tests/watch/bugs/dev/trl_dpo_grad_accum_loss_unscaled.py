"""DPO on a small causal LM with LoRA adapters, through a TRL-style DPOTrainer that subclasses a
Hugging Face-style Trainer, with per_device_train_batch_size=2 and gradient_accumulation_steps=8.
The base Trainer divides each micro-batch loss by the accumulation steps only when the model does
not accept loss keyword arguments (such a model is expected to normalise by num_items_in_batch
itself). The policy's forward takes **kwargs, so the flag is set; but DPOTrainer computes its own
loss in compute_loss and never uses num_items_in_batch. Every micro-batch loss goes into backward
undivided: the accumulated gradient and the logged loss are 8 times too large, and the clipping at
max_grad_norm=1.0 works on the inflated norm.

Thread: https://github.com/huggingface/trl/pull/2615
"""
import inspect
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

VOCAB, PROMPT, COMPLETION = 32, 8, 6


@dataclass
class DPOConfig:
    learning_rate: float = 2e-3
    per_device_train_batch_size: int = 2
    gradient_accumulation_steps: int = 8
    max_steps: int = 80
    max_grad_norm: float = 1.0
    beta: float = 0.1
    logging_steps: int = 10


class LoraLinear(nn.Module):
    def __init__(self, base, r=4, alpha=8):
        super().__init__()
        self.base = base.requires_grad_(False)
        self.lora_A = nn.Parameter(torch.randn(r, base.in_features) / base.in_features ** 0.5)
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r))
        self.scaling, self.disabled = alpha / r, False

    def forward(self, x):
        out = self.base(x)
        return out if self.disabled else out + (x @ self.lora_A.t() @ self.lora_B.t()) * self.scaling


class TinyForCausalLM(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.up_proj, self.down_proj = nn.Linear(dim, 2 * dim), nn.Linear(2 * dim, dim)
        self.lm_head = nn.Linear(dim, VOCAB)

    def forward(self, input_ids, attention_mask=None, **kwargs):
        h = self.rnn(self.embed_tokens(input_ids))[0]
        h = h + self.down_proj(F.gelu(self.up_proj(h)))
        return {"logits": self.lm_head(h)}


class PeftModel(nn.Module):
    def __init__(self, base_model, target_modules=("up_proj", "down_proj")):
        super().__init__()
        base_model.requires_grad_(False)
        for name in target_modules:
            setattr(base_model, name, LoraLinear(getattr(base_model, name)))
        self.base_model = base_model

    def forward(self, **kwargs):
        return self.base_model(**kwargs)

    @contextmanager
    def disable_adapter(self):
        loras = [m for m in self.modules() if isinstance(m, LoraLinear)]
        for m in loras:
            m.disabled = True
        yield
        for m in loras:
            m.disabled = False


class Trainer:
    def __init__(self, model, args, train_dataset):
        self.model, self.args, self.train_dataset = model, args, train_dataset
        forward = model.base_model.forward if isinstance(model, PeftModel) else model.forward
        params = inspect.signature(forward).parameters.values()
        self.model_accepts_loss_kwargs = any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params)

    def training_step(self, model, inputs, num_items_in_batch=None):
        loss = self.compute_loss(model, inputs, num_items_in_batch=num_items_in_batch)
        if not self.model_accepts_loss_kwargs:
            loss = loss / self.args.gradient_accumulation_steps
        loss.backward()
        return loss.detach()

    def train(self):
        args, model = self.args, self.model
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=args.learning_rate)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1 - s / args.max_steps)
        g, batches, tr_loss = torch.Generator().manual_seed(1), [], torch.zeros(())
        for step in range(1, args.max_steps + 1):
            for _ in range(args.gradient_accumulation_steps):
                if not batches:
                    order = torch.randperm(len(self.train_dataset), generator=g).tolist()
                    bs = args.per_device_train_batch_size
                    batches = [order[i:i + bs] for i in range(0, len(order), bs)]
                idx = batches.pop()
                inputs = {k: torch.stack([self.train_dataset[i][k] for i in idx]) for k in self.train_dataset[0]}
                num_items = (inputs["labels"] != -100).sum() if "labels" in inputs else None
                tr_loss += self.training_step(model, inputs, num_items)
            grad_norm = nn.utils.clip_grad_norm_(params, args.max_grad_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            if step % args.logging_steps == 0:
                acc = torch.stack(self._metrics.pop("rewards/accuracies")).mean()
                print(f"step {step} loss {tr_loss.item() / args.logging_steps:.4f} grad_norm {grad_norm:.3f} "
                      f"rewards/accuracies {acc:.3f}")
                tr_loss = torch.zeros(())


class DPOTrainer(Trainer):
    def __init__(self, model, args, train_dataset):
        super().__init__(model, args, train_dataset)
        self.beta, self._metrics = args.beta, defaultdict(list)

    def concatenated_forward(self, model, batch):
        ids = torch.cat([batch["chosen_input_ids"], batch["rejected_input_ids"]])
        mask = torch.cat([batch["chosen_loss_mask"], batch["rejected_loss_mask"]])[:, 1:]
        logp = F.log_softmax(model(input_ids=ids)["logits"][:, :-1], -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        per_seq = (logp * mask).sum(-1)
        n = batch["chosen_input_ids"].size(0)
        return per_seq[:n], per_seq[n:]

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        chosen, rejected = self.concatenated_forward(model, inputs)
        with torch.no_grad(), model.disable_adapter():
            ref_chosen, ref_rejected = self.concatenated_forward(model, inputs)
        margin = self.beta * ((chosen - ref_chosen) - (rejected - ref_rejected))
        self._metrics["rewards/accuracies"].append((margin > 0).float().mean())
        return -F.logsigmoid(margin).mean()


def preference_pairs(n, seed):
    g = torch.Generator().manual_seed(seed)
    mask = torch.cat([torch.zeros(PROMPT), torch.ones(COMPLETION)])
    pairs = []
    for _ in range(n):
        prompt = torch.randint(0, VOCAB, (PROMPT,), generator=g)
        chosen = [int(prompt[-1])]
        for _ in range(COMPLETION):
            chosen.append((3 * chosen[-1] + 1) % VOCAB)
        rejected = torch.randint(0, VOCAB, (COMPLETION,), generator=g)
        pairs.append({"chosen_input_ids": torch.cat([prompt, torch.tensor(chosen[1:])]),
                      "rejected_input_ids": torch.cat([prompt, rejected]),
                      "chosen_loss_mask": mask, "rejected_loss_mask": mask})
    return pairs


def main():
    torch.manual_seed(0)
    model = PeftModel(TinyForCausalLM())
    DPOTrainer(model, DPOConfig(), preference_pairs(400, seed=0)).train()


if __name__ == "__main__":
    main()
