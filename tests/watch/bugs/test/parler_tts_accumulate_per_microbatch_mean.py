"""A Parler-TTS style training script: a decoder predicts several codebooks of audio codes per
frame, the model's forward computes a CrossEntropyLoss (mean over the non -100 label positions of
that micro-batch, averaged over codebooks), and the loop wraps each batch in an
accelerator.accumulate(model) block that calls accelerator.backward(loss) (which divides the loss
by gradient_accumulation_steps), clips, and calls optimizer.step(), lr_scheduler.step() and
optimizer.zero_grad(), which only take effect on the micro-batch where gradients sync. Audio
lengths vary a lot from utterance to utterance, so the micro-batches of one optimizer step hold
very different numbers of code frames; averaging each micro-batch's mean loss gives every
micro-batch the same weight. A frame in a short micro-batch weighs several times more than a
frame in a long one, so the accumulated gradient is not the gradient of the mean loss over all
frames of the step, and the logged loss is the last micro-batch's mean.

Thread: https://github.com/huggingface/parler-tts/pull/176
"""
import contextlib

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

NUM_CODEBOOKS = 4
CODEBOOK_SIZE = 32
BOS = CODEBOOK_SIZE
N_DESCRIPTIONS = 16


class Accelerator:
    """Just enough of accelerate's gradient-accumulation behaviour for one process."""

    def __init__(self, gradient_accumulation_steps):
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.step = 0
        self.sync_gradients = True

    @contextlib.contextmanager
    def accumulate(self, model):
        self.step += 1
        self.sync_gradients = self.step % self.gradient_accumulation_steps == 0
        yield

    def backward(self, loss):
        (loss / self.gradient_accumulation_steps).backward()

    def clip_grad_norm_(self, params, max_norm):
        return torch.nn.utils.clip_grad_norm_(params, max_norm)

    def prepare(self, optimizer, scheduler):
        return AcceleratedOptimizer(optimizer, self), AcceleratedScheduler(scheduler, self)


class AcceleratedOptimizer:
    def __init__(self, optimizer, accelerator):
        self.optimizer, self.accelerator = optimizer, accelerator

    def step(self):
        if self.accelerator.sync_gradients:
            self.optimizer.step()

    def zero_grad(self):
        if self.accelerator.sync_gradients:
            self.optimizer.zero_grad()


class AcceleratedScheduler:
    def __init__(self, scheduler, accelerator):
        self.scheduler, self.accelerator = scheduler, accelerator

    def step(self):
        if self.accelerator.sync_gradients:
            self.scheduler.step()

    def get_last_lr(self):
        return self.scheduler.get_last_lr()


class CodesDataset(Dataset):
    """Each utterance: a description id and a code sequence whose codebook k follows a simple
    per-description pattern; lengths from 6 to 80 frames."""

    def __init__(self, n, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.patterns = torch.randint(0, CODEBOOK_SIZE, (N_DESCRIPTIONS, NUM_CODEBOOKS, 8),
                                      generator=torch.Generator().manual_seed(7))
        self.items = []
        for _ in range(n):
            desc = int(torch.randint(0, N_DESCRIPTIONS, (1,), generator=g))
            length = int(torch.randint(6, 81, (1,), generator=g))
            codes = self.patterns[desc][:, torch.arange(length) % 8]
            noise = torch.rand(codes.shape, generator=g) < 0.2
            codes = torch.where(noise, torch.randint(0, CODEBOOK_SIZE, codes.shape, generator=g), codes)
            self.items.append((desc, codes.T))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def data_collator(batch):
    max_len = max(codes.shape[0] for _, codes in batch)
    labels = torch.full((len(batch), max_len, NUM_CODEBOOKS), -100)
    for i, (_, codes) in enumerate(batch):
        labels[i, :codes.shape[0]] = codes
    desc = torch.tensor([d for d, _ in batch])
    return {"description_ids": desc, "labels": labels}


class ParlerTTSForConditionalGeneration(nn.Module):
    def __init__(self, d=48):
        super().__init__()
        self.text_encoder = nn.Embedding(N_DESCRIPTIONS, d)
        self.code_embed = nn.ModuleList([nn.Embedding(CODEBOOK_SIZE + 1, d) for _ in range(NUM_CODEBOOKS)])
        self.decoder = nn.GRU(d, d, batch_first=True)
        self.lm_heads = nn.ModuleList([nn.Linear(d, CODEBOOK_SIZE) for _ in range(NUM_CODEBOOKS)])

    def forward(self, description_ids, labels):
        inputs = torch.cat([torch.full_like(labels[:, :1], BOS), labels[:, :-1]], 1).clamp(min=0)
        h = sum(emb(inputs[..., k]) for k, emb in enumerate(self.code_embed))
        h0 = self.text_encoder(description_ids).unsqueeze(0)
        out, _ = self.decoder(h, h0)
        loss_fct = nn.CrossEntropyLoss()
        loss = torch.zeros([])
        per_codebook_losses = []
        for k, head in enumerate(self.lm_heads):
            codebook_loss = loss_fct(head(out).reshape(-1, CODEBOOK_SIZE), labels[..., k].reshape(-1))
            loss = loss + codebook_loss
            per_codebook_losses.append(codebook_loss)
        return loss / NUM_CODEBOOKS, per_codebook_losses


def main():
    torch.manual_seed(0)
    gradient_accumulation_steps = 4
    per_device_train_batch_size = 2
    num_epochs = 2
    dataset = CodesDataset(544)
    accelerator = Accelerator(gradient_accumulation_steps=gradient_accumulation_steps)
    model = ParlerTTSForConditionalGeneration()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, betas=(0.9, 0.99), weight_decay=0.01)
    total_train_steps = num_epochs * len(dataset) // (per_device_train_batch_size * gradient_accumulation_steps)
    lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / 20) * max(0.0, 1 - s / total_train_steps))
    optimizer, lr_scheduler = accelerator.prepare(optimizer, lr_scheduler)

    def train_step(batch):
        loss, per_codebook_losses = model(**batch)
        metrics = {"loss": loss}
        metrics.update({f"codebook_{i}_loss": l for i, l in enumerate(per_codebook_losses)})
        return loss, metrics

    cur_step = 0
    model.train()
    for epoch in range(num_epochs):
        train_dataloader = DataLoader(dataset, collate_fn=data_collator, batch_size=per_device_train_batch_size,
                                      shuffle=True, generator=torch.Generator().manual_seed(epoch))
        for batch in train_dataloader:
            with accelerator.accumulate(model):
                loss, train_metric = train_step(batch)
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
            if accelerator.sync_gradients:
                cur_step += 1
                if cur_step % 17 == 0:
                    print(f"Step... ({cur_step} / {total_train_steps} | Loss: {train_metric['loss'].item():.4f}, "
                          f"Learning Rate: {lr_scheduler.get_last_lr()[0]:.2e})")


if __name__ == "__main__":
    main()
