"""A TRL SFTTrainer run as in the report: TrainingArguments with per_device_train_batch_size=1 and
gradient_accumulation_steps=N (expected to behave like batch N without accumulation), an
SFTTrainer over a text dataset with a causal-LM collator (labels = input_ids, padding set to -100),
and trainer.train(). The Trainer's training_step takes the model's own loss, a cross-entropy mean
over the non -100 labels of that micro-batch, divides it by gradient_accumulation_steps and calls
backward; the inner loop steps the optimizer and the scheduler every N micro-batches. With one
example per micro-batch every example gets the same weight whatever its length, so the tokens of a
short example weigh many times more than those of a long one, and the run is not the batch-N run it
was meant to equal: the average of per-micro-batch token means replaces the mean over all tokens
of the accumulation window.

Thread: https://github.com/huggingface/trl/issues/2175
"""
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

VOCAB = 32
BOS, EOS, PAD = 0, 1, 2


@dataclass
class TrainingArguments:
    output_dir: str = "sft-out"
    per_device_train_batch_size: int = 1
    gradient_accumulation_steps: int = 8
    learning_rate: float = 3e-3
    num_train_epochs: int = 1
    max_steps: int = 70
    warmup_ratio: float = 0.05
    lr_scheduler_type: str = "cosine"
    logging_steps: int = 10
    max_grad_norm: float = 1.0
    seed: int = 0


class ToyTokenizer:
    pad_token_id, eos_token_id, bos_token_id = PAD, EOS, BOS

    def __call__(self, text_ids, max_length):
        ids = [BOS] + list(text_ids)[: max_length - 2] + [EOS]
        return {"input_ids": ids, "attention_mask": [1] * len(ids)}


class DataCollatorForLanguageModeling:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def __call__(self, features):
        width = max(len(f["input_ids"]) for f in features)
        ids = torch.full((len(features), width), self.tokenizer.pad_token_id)
        mask = torch.zeros((len(features), width), dtype=torch.long)
        for i, f in enumerate(features):
            ids[i, :len(f["input_ids"])] = torch.tensor(f["input_ids"])
            mask[i, :len(f["input_ids"])] = 1
        labels = ids.clone()
        labels[mask == 0] = -100
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}


class TinyCausalLM(nn.Module):
    """Returns an object with .loss like a transformers CausalLM: shifted CE, mean over labels != -100."""

    def __init__(self, dim=48):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.lm_head = nn.Linear(dim, VOCAB)

    def forward(self, input_ids, attention_mask=None, labels=None):
        h, _ = self.rnn(self.embed_tokens(input_ids))
        logits = self.lm_head(h)
        out = type("CausalLMOutput", (), {})()
        out.logits = logits
        out.loss = None
        if labels is not None:
            out.loss = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1),
                                       ignore_index=-100)
        return out


class Trainer:
    def __init__(self, model, args, train_dataset, data_collator):
        self.model, self.args = model, args
        self.train_dataset, self.data_collator = train_dataset, data_collator

    def get_train_dataloader(self):
        return DataLoader(self.train_dataset, batch_size=self.args.per_device_train_batch_size, shuffle=True,
                          collate_fn=self.data_collator, generator=torch.Generator().manual_seed(self.args.seed))

    def create_optimizer_and_scheduler(self, num_training_steps):
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=self.args.learning_rate, weight_decay=0.0)
        warmup = max(1, int(self.args.warmup_ratio * num_training_steps))

        def lr_lambda(step):
            if step < warmup:
                return (step + 1) / warmup
            progress = (step - warmup) / max(1, num_training_steps - warmup)
            return 0.5 * (1 + math.cos(math.pi * progress))

        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_lambda)

    def compute_loss(self, model, inputs):
        return model(**inputs).loss

    def training_step(self, model, inputs):
        model.train()
        loss = self.compute_loss(model, inputs)
        loss = loss / self.args.gradient_accumulation_steps
        loss.backward()
        return loss.detach()

    def train(self):
        torch.manual_seed(self.args.seed)
        max_steps = self.args.max_steps
        self.create_optimizer_and_scheduler(max_steps)
        global_step, tr_loss = 0, 0.0
        self.optimizer.zero_grad()
        while global_step < max_steps:
            for step, inputs in enumerate(self.get_train_dataloader()):
                tr_loss += self.training_step(self.model, inputs).item()
                if (step + 1) % self.args.gradient_accumulation_steps == 0:
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.args.max_grad_norm)
                    self.optimizer.step()
                    self.lr_scheduler.step()
                    self.optimizer.zero_grad()
                    global_step += 1
                    if global_step % self.args.logging_steps == 0:
                        print({"loss": round(tr_loss / self.args.logging_steps, 4),
                               "learning_rate": self.lr_scheduler.get_last_lr()[0], "step": global_step})
                        tr_loss = 0.0
                    if global_step >= max_steps:
                        break


class SFTTrainer(Trainer):
    def __init__(self, model, args, train_dataset, processing_class, dataset_text_field="text", max_seq_length=96):
        tokenized = [processing_class(ex[dataset_text_field], max_seq_length) for ex in train_dataset]
        super().__init__(model, args, tokenized, DataCollatorForLanguageModeling(processing_class))


def make_dataset(n, seed=0):
    """Chat-like texts: long explanations use words 3..31 evenly; short replies are mostly word 3."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for i in range(n):
        if i % 2 == 0:
            text = torch.randint(3, VOCAB, (int(torch.randint(60, 90, (1,), generator=g)),), generator=g)
        else:
            k = int(torch.randint(2, 5, (1,), generator=g))
            text = torch.where(torch.rand(k, generator=g) < 0.8, torch.tensor(3),
                               torch.randint(4, VOCAB, (k,), generator=g))
        rows.append({"text": text.tolist()})
    return rows


def main():
    torch.manual_seed(0)
    training_args = TrainingArguments(per_device_train_batch_size=1, gradient_accumulation_steps=8, max_steps=70)
    trainer = SFTTrainer(model=TinyCausalLM(), args=training_args, train_dataset=make_dataset(600),
                         processing_class=ToyTokenizer(), dataset_text_field="text", max_seq_length=96)
    trainer.train()


if __name__ == "__main__":
    main()
