"""Alpaca/Vicuna-style LoRA instruction tuning: a `generate_and_tokenize_prompt` map function
builds input_ids, labels (prompt positions set to -100 so only the response is scored) and
attention_mask per example, then a HF-style `Trainer` (micro-batches, gradient accumulation,
AdamW, warmup) trains a causal LM with `data_collator=DataCollatorForLanguageModeling(tok, mlm=False)`.
That collator ignores the prepared `labels` and rebuilds them as a copy of input_ids (only pad
ids become -100), so the -100 prompt mask never reaches the model: the loss is computed on the
whole instruction as well, the logged loss sits high on unpredictable prompt tokens and the
response tokens are learned much more slowly than with the prompt masked.
Thread: https://github.com/Facico/Chinese-Vicuna/issues/99
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 64
PAD, BOS, EOS, INSTR, RESP = 0, 1, 2, 3, 4
FIRST_WORD = 10
CUTOFF_LEN = 24
MICRO_BATCH_SIZE = 16
GRADIENT_ACCUMULATION_STEPS = 2
EPOCHS = 3
LEARNING_RATE = 1e-2
WARMUP_STEPS = 10


# ---------------------------------------------------------------- tiny stand-ins
class TinyTokenizer:
    """Word-level tokenizer over pre-split integer 'words'; adds BOS, and EOS when asked."""

    def __init__(self, add_eos_token=True):
        self.add_eos_token = add_eos_token
        self.pad_token_id = PAD
        self.eos_token_id = EOS

    def __call__(self, words, truncation=True, max_length=None, padding=None):
        ids = [BOS] + list(words)
        if self.add_eos_token:
            ids = ids + [EOS]
        if truncation and max_length is not None:
            ids = ids[:max_length]
        if padding == "max_length":
            ids = ids + [self.pad_token_id] * (max_length - len(ids))
        return {"input_ids": ids, "attention_mask": [1] * len(ids)}

    def pad(self, features):
        longest = max(len(f["input_ids"]) for f in features)
        out = {"input_ids": [], "attention_mask": []}
        for f in features:
            n = longest - len(f["input_ids"])
            out["input_ids"].append(f["input_ids"] + [self.pad_token_id] * n)
            out["attention_mask"].append(f["attention_mask"] + [0] * n)
        return {k: torch.tensor(v) for k, v in out.items()}


class DataCollatorForLanguageModeling:
    """Same behaviour as the transformers collator with mlm=False: labels = input_ids copy."""

    def __init__(self, tokenizer, mlm=False):
        self.tokenizer, self.mlm = tokenizer, mlm

    def __call__(self, features):
        batch = self.tokenizer.pad([{k: f[k] for k in ("input_ids", "attention_mask")} for f in features])
        labels = batch["input_ids"].clone()
        labels[labels == self.tokenizer.pad_token_id] = -100
        batch["labels"] = labels
        return batch


class DataCollatorForSeq2Seq:
    """Keeps the labels prepared by the map function, pads them with -100."""

    def __init__(self, tokenizer, padding=True):
        self.tokenizer = tokenizer

    def __call__(self, features):
        batch = self.tokenizer.pad([{k: f[k] for k in ("input_ids", "attention_mask")} for f in features])
        longest = batch["input_ids"].shape[1]
        batch["labels"] = torch.tensor([f["labels"] + [-100] * (longest - len(f["labels"])) for f in features])
        return batch


class TinyCausalLM(nn.Module):
    """LlamaForCausalLM call shape: forward(input_ids, attention_mask, labels) -> dict(loss, logits)."""

    def __init__(self, vocab=VOCAB, dim=96):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.lm_head = nn.Linear(dim, vocab)

    def forward(self, input_ids, attention_mask=None, labels=None):
        h, _ = self.rnn(self.embed(input_ids))
        logits = self.lm_head(h)
        out = {"logits": logits}
        if labels is not None:  # the model shifts internally, like HF causal LMs
            out["loss"] = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)),
                                          labels[:, 1:].reshape(-1), ignore_index=-100)
        return out


class Trainer:
    def __init__(self, model, train_dataset, eval_dataset, args, data_collator):
        self.model, self.train_dataset, self.eval_dataset = model, train_dataset, eval_dataset
        self.args, self.data_collator = args, data_collator

    def train(self):
        a = self.args
        opt = torch.optim.AdamW(self.model.parameters(), lr=a["learning_rate"], weight_decay=0.0)
        n_micro = len(self.train_dataset) // a["per_device_train_batch_size"]
        total = EPOCHS * n_micro // a["gradient_accumulation_steps"]
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: min(1.0, (s + 1) / a["warmup_steps"]) * max(0.0, 1 - s / total))
        g = torch.Generator().manual_seed(1)
        step, running = 0, []
        for epoch in range(a["num_train_epochs"]):
            order = torch.randperm(len(self.train_dataset), generator=g).tolist()
            for i in range(n_micro):
                idx = order[i * a["per_device_train_batch_size"]:(i + 1) * a["per_device_train_batch_size"]]
                batch = self.data_collator([self.train_dataset[j] for j in idx])
                self.model.train()
                loss = self.model(**batch)["loss"] / a["gradient_accumulation_steps"]
                loss.backward()
                running.append(loss.item() * a["gradient_accumulation_steps"])
                if (i + 1) % a["gradient_accumulation_steps"] == 0:
                    opt.step()
                    sched.step()
                    opt.zero_grad()
                    step += 1
                    if step % a["logging_steps"] == 0:
                        ev = self.evaluate()
                        print(f"step {step:4d} | train loss {sum(running) / len(running):.3f} | "
                              f"eval response-token acc {ev['acc']:.3f} | eval response loss {ev['loss']:.3f}")
                        running = []
        return self.evaluate()

    @torch.no_grad()
    def evaluate(self):
        """Teacher-forced accuracy and loss on the response tokens only (prompt mask from the map fn)."""
        self.model.eval()
        batch = DataCollatorForSeq2Seq(TinyTokenizer())(self.eval_dataset)
        logits = self.model(batch["input_ids"], batch["attention_mask"])["logits"][:, :-1]
        tgt = batch["labels"][:, 1:]
        keep = (tgt != -100) & (tgt != PAD)
        acc = (logits.argmax(-1)[keep] == tgt[keep]).float().mean().item()
        loss = F.cross_entropy(logits[keep], tgt[keep]).item()
        return {"acc": acc, "loss": loss}


# ---------------------------------------------------------------- data
def make_records(n, seed):
    """instruction: 12 random words (unpredictable); output: 4 words looked up from the last
    instruction word in fixed tables. Only the output is learnable, which is what SFT should learn."""
    g = torch.Generator().manual_seed(seed)
    tg = torch.Generator().manual_seed(123)
    tables = [torch.randperm(VOCAB - FIRST_WORD, generator=tg) + FIRST_WORD for _ in range(4)]
    recs = []
    for _ in range(n):
        instr = (torch.randint(0, VOCAB - FIRST_WORD, (12,), generator=g) + FIRST_WORD).tolist()
        output = [int(t[instr[-1] - FIRST_WORD]) for t in tables]
        recs.append({"instruction": instr, "output": output})
    return recs


tokenizer = TinyTokenizer(add_eos_token=True)


def generate_and_tokenize_prompt(data_point):
    # mask the prompt so that the loss is computed only on the response
    user_prompt = [INSTR] + data_point["instruction"] + [RESP]
    len_user_prompt_tokens = len(tokenizer(user_prompt, truncation=True, max_length=CUTOFF_LEN + 1)["input_ids"]) - 1
    full_tokens = tokenizer(user_prompt + data_point["output"], truncation=True,
                            max_length=CUTOFF_LEN + 1, padding="max_length")["input_ids"][:-1]
    return {
        "input_ids": full_tokens,
        "labels": [-100] * len_user_prompt_tokens + full_tokens[len_user_prompt_tokens:],
        "attention_mask": [1] * len(full_tokens),
    }


def main():
    torch.manual_seed(0)
    train_data = [generate_and_tokenize_prompt(r) for r in make_records(1024, seed=0)]
    val_data = [generate_and_tokenize_prompt(r) for r in make_records(256, seed=1)]
    model = TinyCausalLM()
    print(f"ln(V) = {math.log(VOCAB):.3f}; prompt tokens per example ~14, response tokens 4 (+eos)")
    trainer = Trainer(
        model=model,
        train_dataset=train_data,
        eval_dataset=val_data,
        args=dict(per_device_train_batch_size=MICRO_BATCH_SIZE,
                  gradient_accumulation_steps=GRADIENT_ACCUMULATION_STEPS,
                  warmup_steps=WARMUP_STEPS, num_train_epochs=EPOCHS,
                  learning_rate=LEARNING_RATE, logging_steps=16),
        data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False),
    )
    final = trainer.train()
    print(f"final: eval response-token acc {final['acc']:.3f}, eval response loss {final['loss']:.3f}")


if __name__ == "__main__":
    main()
