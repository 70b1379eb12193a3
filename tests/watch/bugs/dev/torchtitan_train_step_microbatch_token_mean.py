"""A torchtitan-style Trainer for SFT-like language-model training: train_step() pulls
gradient_accumulation_steps micro-batches from the data iterator, forward_backward_step() runs the
model on one (input_dict, labels) pair, takes the cross-entropy loss with the default "mean"
reduction over the labels that are not IGNORE_INDEX (prompt and padding positions are set to
IGNORE_INDEX), divides it by gradient_accumulation_steps and calls backward; then train_step clips
the gradient norm and calls optimizer.step() and lr_scheduler.step(). Each micro-batch's loss is a
mean over its own valid tokens, so a micro-batch holding only a few answer tokens gets the same
weight as one holding hundreds: a token in a short micro-batch counts many times more than a token
in a long one, and the accumulated gradient is not that of the token mean over the whole step.
Here the short answers use a different token distribution than the long ones, so the model drifts
toward the short answers' statistics.

Thread: https://github.com/pytorch/torchtitan/pull/2206
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

IGNORE_INDEX = -100
VOCAB = 24
SEQ_LEN = 64
BOS, SEP = 0, 1


class SFTDataset(Dataset):
    """Prompt tokens (masked) followed by an answer. Half the samples have long answers drawn
    from an even distribution over the word ids, half have 2-token answers that are mostly
    token 2. Everything after the answer is padding (masked)."""

    def __init__(self, n, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.rows = []
        for i in range(n):
            prompt = torch.randint(3, VOCAB, (6,), generator=g)
            if i % 2 == 0:
                answer = torch.randint(2, VOCAB, (SEQ_LEN - 9,), generator=g)
            else:
                answer = torch.where(torch.rand(2, generator=g) < 0.85, torch.tensor(2),
                                     torch.randint(3, VOCAB, (2,), generator=g))
            tokens = torch.cat([torch.tensor([BOS]), prompt, torch.tensor([SEP]), answer])
            inputs = torch.zeros(SEQ_LEN, dtype=torch.long)
            labels = torch.full((SEQ_LEN,), IGNORE_INDEX)
            inputs[:len(tokens) - 1] = tokens[:-1]
            labels[:len(tokens) - 1] = tokens[1:]
            labels[:len(prompt) + 1] = IGNORE_INDEX      # no loss on the prompt
            self.rows.append(({"input": inputs}, labels))

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


class TinyDecoder(nn.Module):
    def __init__(self, dim=48):
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCAB, dim)
        self.layer = nn.GRU(dim, dim, batch_first=True)
        self.norm = nn.LayerNorm(dim)
        self.output = nn.Linear(dim, VOCAB)

    def forward(self, tokens):
        h, _ = self.layer(self.tok_embeddings(tokens))
        return self.output(self.norm(h))


def cross_entropy_loss(pred, labels):
    return F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1), ignore_index=IGNORE_INDEX)


class Trainer:
    def __init__(self, model, dataloader, gradient_accumulation_steps=4, steps=80, lr=3e-3, max_norm=1.0):
        self.model = model
        self.dataloader = dataloader
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.steps = steps
        self.max_norm = max_norm
        self.loss_fn = cross_entropy_loss
        self.optimizers = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
        warmup = 5
        self.lr_schedulers = torch.optim.lr_scheduler.LambdaLR(
            self.optimizers, lambda s: min(1.0, (s + 1) / warmup))
        self.step = 0

    def batch_generator(self):
        while True:
            for batch in self.dataloader:
                yield batch

    def forward_backward_step(self, input_dict, labels):
        pred = self.model(input_dict["input"])
        loss = self.loss_fn(pred, labels)
        # scale for gradient accumulation
        loss = loss / self.gradient_accumulation_steps
        loss.backward()
        return loss

    def train_step(self, data_iterator):
        self.optimizers.zero_grad()
        accumulated_losses = []
        for _microbatch in range(self.gradient_accumulation_steps):
            input_dict, labels = next(data_iterator)
            loss = self.forward_backward_step(input_dict, labels)
            accumulated_losses.append(loss.detach())
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
        self.optimizers.step()
        self.lr_schedulers.step()
        loss = torch.sum(torch.stack(accumulated_losses))
        if self.step % 10 == 0:
            print(f"step {self.step:3d}  loss {loss.item():.4f}  grad_norm {grad_norm.item():.3f}")

    def train(self):
        self.model.train()
        data_iterator = self.batch_generator()
        while self.step < self.steps:
            self.train_step(data_iterator)
            self.step += 1


def main():
    torch.manual_seed(0)
    dataset = SFTDataset(512)
    dataloader = DataLoader(dataset, batch_size=2, shuffle=True, generator=torch.Generator().manual_seed(0))
    trainer = Trainer(TinyDecoder(), dataloader, gradient_accumulation_steps=4, steps=80)
    trainer.train()


if __name__ == "__main__":
    main()
