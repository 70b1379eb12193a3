"""Single-device full fine-tuning recipe in the style of torchtune: a FullFinetuneRecipeSingleDevice
class with setup() (model, AdamW, cosine-with-warmup schedule, a DataLoader with an SFT padding
collator that pads labels with -100) and train(), which loops over micro-batches of 2 with
gradient_accumulation_steps=8: each micro-batch loss is the cross-entropy averaged over that
micro-batch's own non-ignored tokens, divided by the accumulation steps, backpropagated, and the
optimizer steps every 8 micro-batches. The SFT samples have answers of very different lengths, so
the accumulated gradient is a mean of per-micro-batch means: a token in a micro-batch of short
answers weighs many times more than one in a micro-batch of long answers, and the result depends on
how samples fall into micro-batches instead of matching one batch of 16.

Thread: https://github.com/meta-pytorch/torchtune/pull/1875
"""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

VOCAB, PAD_ID, SEP_ID, EOS_ID, IGNORE = 48, 0, 1, 2, -100


class SFTDataset(Dataset):
    """Prompt of 6 tokens, then SEP, then an answer: 30% are one-token answers, 70% long answers
    that continue a successor chain from the prompt's last token."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        succ = torch.randperm(VOCAB - 3, generator=torch.Generator().manual_seed(5)) + 3
        self.samples = []
        for _ in range(n):
            prompt = (torch.randint(3, VOCAB, (6,), generator=g)).tolist()
            if float(torch.rand(1, generator=g)) < 0.3:
                answer = [int(succ[prompt[0] - 3])]
            else:
                answer = [prompt[-1]]
                for _ in range(int(torch.randint(24, 40, (1,), generator=g))):
                    nxt = int(succ[answer[-1] - 3]) if torch.rand(1, generator=g) < 0.7 else \
                        int(torch.randint(3, VOCAB, (1,), generator=g))
                    answer.append(nxt)
                answer = answer[1:]
            tokens = prompt + [SEP_ID] + answer + [EOS_ID]
            labels = [IGNORE] * (len(prompt) + 1) + answer + [EOS_ID]
            self.samples.append((tokens, labels))

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        tokens, labels = self.samples[i]
        return {"tokens": tokens, "labels": labels}


def padded_collate_sft(batch):
    width = max(len(b["tokens"]) for b in batch)
    tokens = torch.full((len(batch), width), PAD_ID)
    labels = torch.full((len(batch), width), IGNORE)
    for i, b in enumerate(batch):
        tokens[i, :len(b["tokens"])] = torch.tensor(b["tokens"])
        labels[i, :len(b["labels"])] = torch.tensor(b["labels"])
    return {"tokens": tokens, "labels": labels}


class TransformerDecoder(nn.Module):
    def __init__(self, vocab=VOCAB, dim=64, layers=2, heads=4, max_len=64):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_len, dim)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True, norm_first=True)
            for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens):
        t = tokens.size(1)
        h = self.tok_embeddings(tokens) + self.pos(torch.arange(t))
        mask = nn.Transformer.generate_square_subsequent_mask(t)
        for layer in self.layers:
            h = layer(h, src_mask=mask, is_causal=True)
        return self.output(self.norm(h))


class CrossEntropyLossMasked(nn.Module):
    def forward(self, logits, labels):
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=IGNORE)


class FullFinetuneRecipeSingleDevice:
    def __init__(self, cfg):
        self.cfg = cfg
        self._gradient_accumulation_steps = cfg["gradient_accumulation_steps"]
        self.global_step = 0

    def setup(self):
        torch.manual_seed(self.cfg["seed"])
        self._model = TransformerDecoder()
        self._loss_fn = CrossEntropyLossMasked()
        self._optimizer = torch.optim.AdamW(self._model.parameters(), lr=self.cfg["lr"], weight_decay=0.01)
        ds = SFTDataset(self.cfg["num_samples"], seed=0)
        self._dataloader = DataLoader(ds, batch_size=self.cfg["batch_size"], shuffle=True,
                                      collate_fn=padded_collate_sft,
                                      generator=torch.Generator().manual_seed(self.cfg["seed"]))
        total = self.cfg["epochs"] * len(self._dataloader) // self._gradient_accumulation_steps
        warmup = self.cfg["num_warmup_steps"]
        self._lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
            self._optimizer,
            lambda s: (s + 1) / warmup if s < warmup else 0.5 * (1 + math.cos(math.pi * (s - warmup) / (total - warmup))))
        self.ignore_labels_cache = torch.full((self.cfg["batch_size"], 1), IGNORE)

    def _loss_step(self, batch):
        labels = batch.pop("labels")
        logits = self._model(**batch)
        labels = torch.hstack((labels[..., 1:], self.ignore_labels_cache[: labels.shape[0]]))
        return self._loss_fn(logits, labels)

    def train(self):
        self._optimizer.zero_grad()
        running_loss = 0.0
        for curr_epoch in range(self.cfg["epochs"]):
            self._model.train()
            for idx, batch in enumerate(self._dataloader):
                loss = self._loss_step(batch) / self._gradient_accumulation_steps
                running_loss += loss.detach()
                loss.backward()
                if (idx + 1) % self._gradient_accumulation_steps == 0:
                    self._optimizer.step()
                    self._optimizer.zero_grad(set_to_none=True)
                    self._lr_scheduler.step()
                    self.global_step += 1
                    if self.global_step % 10 == 0:
                        print(f"epoch {curr_epoch} step {self.global_step} loss {running_loss.item():.4f} "
                              f"lr {self._lr_scheduler.get_last_lr()[0]:.2e}")
                    running_loss = 0.0

    def evaluate(self):
        self._model.eval()
        ds = SFTDataset(300, seed=1)
        total, count = 0.0, 0
        with torch.no_grad():
            for i in range(0, len(ds), 20):
                batch = padded_collate_sft([ds[j] for j in range(i, min(i + 20, len(ds)))])
                labels = batch["labels"][:, 1:]
                logits = self._model(batch["tokens"])[:, :-1]
                total += F.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1),
                                         ignore_index=IGNORE, reduction="sum").item()
                count += int((labels != IGNORE).sum())
        print(f"held-out per-token loss {total / count:.4f}")


def main():
    cfg = {"seed": 0, "lr": 2e-3, "batch_size": 2, "gradient_accumulation_steps": 8, "epochs": 2,
           "num_samples": 640, "num_warmup_steps": 8}
    recipe = FullFinetuneRecipeSingleDevice(cfg)
    recipe.setup()
    recipe.train()
    recipe.evaluate()


if __name__ == "__main__":
    main()
