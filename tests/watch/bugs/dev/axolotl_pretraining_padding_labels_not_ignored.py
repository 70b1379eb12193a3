"""An axolotl-style streaming pretraining run without sample packing: encode_pretraining(tokenizer,
max_tokens, examples) tokenizes each text, appends eos, and greedily fills fixed rows of max_tokens
with whole documents; when the next document does not fit, the row is closed and its tail filled
with pad_token_id (attention_mask 0). The row's labels are a copy of its input_ids. A Hugging
Face-style Trainer then runs the causal LM, whose loss is a shifted cross-entropy with
ignore_index=-100, with AdamW and a cosine schedule. Because the labels at padded positions hold
the pad id instead of -100, every pad slot is a target: the model spends updates predicting "pad
after pad", and the logged loss mixes in those easy targets and looks better than the loss on the
real text.

Thread: https://github.com/axolotl-ai-cloud/axolotl/pull/2227
"""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

PAD, BOS, EOS = 0, 1, 2
VOCAB = 48


class ToyTokenizer:
    pad_token_id, bos_token_id, eos_token_id = PAD, BOS, EOS

    def __call__(self, texts):
        return {"input_ids": [[BOS] + list(t) for t in texts]}


def encode_pretraining(tokenizer, max_tokens, examples):
    res = tokenizer(examples["text"])
    new_input_ids, new_attention_mask = [], []
    buffer_ids, buffer_mask = [], []

    def close_row():
        pad = max_tokens - len(buffer_ids)
        new_input_ids.append(torch.tensor(buffer_ids + [tokenizer.pad_token_id] * pad))
        new_attention_mask.append(torch.tensor(buffer_mask + [0] * pad))

    for ids in res["input_ids"]:
        ids = ids[: max_tokens - 1] + [tokenizer.eos_token_id]
        if len(buffer_ids) + len(ids) > max_tokens:
            close_row()
            buffer_ids, buffer_mask = [], []
        buffer_ids += ids
        buffer_mask += [1] * len(ids)
    if buffer_ids:
        close_row()
    return {"input_ids": new_input_ids, "labels": [x.clone() for x in new_input_ids],
            "attention_mask": new_attention_mask}


class PretrainingDataset(Dataset):
    def __init__(self, encoded):
        self.encoded = encoded

    def __len__(self):
        return len(self.encoded["input_ids"])

    def __getitem__(self, i):
        return {k: v[i] for k, v in self.encoded.items()}


def make_texts(n, seed=0):
    """Documents of 5-40 tokens from a simple order-1 process (each word tends to follow its predecessor + 1)."""
    g = torch.Generator().manual_seed(seed)
    texts = []
    for _ in range(n):
        length = int(torch.randint(5, 41, (1,), generator=g))
        w = [int(torch.randint(3, VOCAB, (1,), generator=g))]
        for _ in range(length - 1):
            if torch.rand(1, generator=g) < 0.7:
                w.append(3 + (w[-1] - 3 + 1) % (VOCAB - 3))
            else:
                w.append(int(torch.randint(3, VOCAB, (1,), generator=g)))
        texts.append(w)
    return texts


class TinyCausalLM(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.lm_head = nn.Linear(dim, VOCAB)

    def forward(self, input_ids, attention_mask=None, labels=None):
        h, _ = self.rnn(self.embed_tokens(input_ids))
        logits = self.lm_head(h)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1), ignore_index=-100)
        return type("Out", (), {"loss": loss, "logits": logits})()


class Trainer:
    def __init__(self, model, train_dataset, micro_batch_size=4, learning_rate=3e-3, max_steps=80,
                 warmup_steps=5, logging_steps=10):
        self.model, self.train_dataset = model, train_dataset
        self.micro_batch_size, self.max_steps, self.logging_steps = micro_batch_size, max_steps, logging_steps
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.0)
        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min((s + 1) / warmup_steps,
                                          0.5 * (1 + math.cos(math.pi * s / max_steps))))

    def train(self):
        loader = DataLoader(self.train_dataset, batch_size=self.micro_batch_size, shuffle=True,
                            generator=torch.Generator().manual_seed(0))
        step = 0
        self.model.train()
        while step < self.max_steps:
            for batch in loader:
                loss = self.model(**batch).loss
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.optimizer.step()
                self.lr_scheduler.step()
                self.optimizer.zero_grad()
                step += 1
                if step % self.logging_steps == 0:
                    print({"loss": round(loss.item(), 4), "learning_rate": self.lr_scheduler.get_last_lr()[0],
                           "step": step})
                if step >= self.max_steps:
                    break


def main():
    torch.manual_seed(0)
    texts = make_texts(700)
    encoded = encode_pretraining(ToyTokenizer(), max_tokens=64, examples={"text": texts})
    dataset = PretrainingDataset(encoded)
    Trainer(TinyCausalLM(), dataset, micro_batch_size=4, max_steps=80).train()


if __name__ == "__main__":
    main()
