"""A Lightning-style sequence-to-sequence module (training_step / configure_optimizers, driven by a
small fit loop): the decoder input is built from the labels by shift_right (start token in front), as
T5-style models do, and the decoder's logits are then scored with a causal-LM style loss that shifts
once more (logits[:, :-1] against labels[:, 1:]). The task is to copy the source reversed; position t
is trained to emit label t + 1 while it was given label t - 1, so it learns the token after next."""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, PAD, START, LENGTH = 24, 0, 1, 10


def shift_right(labels):
    dec = labels.new_full(labels.shape, PAD)
    dec[:, 1:] = labels[:, :-1]
    dec[:, 0] = START
    return dec.masked_fill(dec == -100, PAD)


class Seq2Seq(nn.Module):
    def __init__(self, vocab=VOCAB, dim=64):
        super().__init__()
        self.src_embed = nn.Embedding(vocab, dim)
        self.tgt_embed = nn.Embedding(vocab, dim)
        self.encoder = nn.GRU(dim, dim, batch_first=True)
        self.decoder = nn.GRU(dim, dim, batch_first=True)
        self.attn_out = nn.Linear(2 * dim, dim)
        self.out = nn.Linear(dim, vocab)

    def forward(self, src, labels):
        memory, h = self.encoder(self.src_embed(src))
        dec, _ = self.decoder(self.tgt_embed(shift_right(labels)), h)
        weights = torch.softmax(dec @ memory.transpose(1, 2), -1)
        return self.out(torch.tanh(self.attn_out(torch.cat([dec, weights @ memory], -1))))


class ReverseTask:
    def __init__(self):
        self.model = Seq2Seq()

    def training_step(self, batch):
        logits = self.model(batch["src"], batch["labels"])
        # bug: the labels were already turned into the decoder input by shift_right; shifting again
        return F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), batch["labels"][:, 1:].reshape(-1),
                               ignore_index=-100)

    def configure_optimizers(self):
        return torch.optim.Adam(self.model.parameters(), lr=3e-3)


def batches(g, n_batches, size=32):
    for _ in range(n_batches):
        src = torch.randint(2, VOCAB, (size, LENGTH), generator=g)
        yield {"src": src, "labels": src.flip(1)}


def fit(task, g, steps):
    optimizer = task.configure_optimizers()
    task.model.train()
    for i, batch in enumerate(batches(g, steps)):
        loss = task.training_step(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if i % 20 == 0:
            print(f"step {i} loss {loss.item():.4f}")


def main():
    torch.manual_seed(0)
    fit(ReverseTask(), torch.Generator().manual_seed(0), steps=70)


if __name__ == "__main__":
    main()
