"""A part-of-speech tagger (embedding + BiLSTM + linear) trained on right-padded sentences of 4-30
tokens. A Trainer class computes the per-token loss with reduction='none' in a helper, zeroes the
padded positions with the attention mask and divides the sum by the number of real tokens."""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, TAGS, PAD = 200, 12, 0


def make_batch(generator, batch_size=16, max_len=30):
    lengths = torch.randint(4, max_len + 1, (batch_size,), generator=generator)
    width = int(lengths.max())
    tokens = torch.zeros(batch_size, width, dtype=torch.long)
    for i, n in enumerate(lengths.tolist()):
        tokens[i, :n] = torch.randint(1, VOCAB, (n,), generator=generator)
    tags = tokens % TAGS
    mask = (tokens != PAD).long()
    return tokens, tags, mask


class Tagger(nn.Module):
    def __init__(self, dim=48):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim, padding_idx=PAD)
        self.lstm = nn.LSTM(dim, dim, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * dim, TAGS)

    def forward(self, tokens):
        return self.out(self.lstm(self.embed(tokens))[0])


def token_loss(logits, tags, mask):
    per_token = F.cross_entropy(logits.transpose(1, 2), tags, reduction="none")
    return (per_token * mask).sum() / mask.sum().clamp(min=1)


class Trainer:
    def __init__(self, model, lr=0.5):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr)

    def train_step(self, batch):
        tokens, tags, mask = batch
        self.optimizer.zero_grad()
        loss = token_loss(self.model(tokens), tags, mask)
        loss.backward()
        self.optimizer.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1)
    trainer = Trainer(Tagger())
    for step in range(60):
        loss = trainer.train_step(make_batch(generator))
        if step % 20 == 0:
            print(f"step {step} loss {loss:.3f}")


if __name__ == "__main__":
    main()
