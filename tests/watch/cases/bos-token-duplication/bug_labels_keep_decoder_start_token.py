"""A speech-to-text style encoder-decoder fine-tuned through a Lightning-like module. The tokenizer
writes every target as <start> words <end>, the collator pads the labels with -100, and the model
builds decoder_input_ids by shifting the labels right behind its own decoder_start_token_id, as
Hugging Face encoder-decoders do. The collator was meant to drop the tokenizer's leading <start>
(the model adds it back) but never does, so every decoder input opens with <start> twice and the
first label the model learns is <start> after <start>."""
import torch
import torch.nn.functional as F
from torch import nn

START, END, PAD, FIRST_WORD, WORDS, FEATS = 1, 2, 0, 3, 20, 12


def shift_right(labels, start):
    out = labels.new_full(labels.shape, PAD)
    out[:, 1:] = labels[:, :-1]
    out[:, 0] = start
    return out.masked_fill(out == -100, PAD)


class Seq2Seq(nn.Module):
    def __init__(self, dim=48):
        super().__init__()
        self.encoder = nn.GRU(FEATS, dim, batch_first=True)
        self.embed = nn.Embedding(FIRST_WORD + WORDS, dim)
        self.decoder = nn.GRU(dim, dim, batch_first=True)
        self.out = nn.Linear(dim, FIRST_WORD + WORDS)

    def forward(self, features, labels):
        _, h = self.encoder(features)
        dec, _ = self.decoder(self.embed(shift_right(labels, START)), h)
        return F.cross_entropy(self.out(dec).transpose(1, 2), labels, ignore_index=-100)


def make_batch(g, size=16):
    lengths = torch.randint(3, 7, (size,), generator=g)
    words = torch.randint(FIRST_WORD, FIRST_WORD + WORDS, (size, 6), generator=g)
    features = torch.zeros(size, 6, FEATS)
    features[:, :, :WORDS // 2] = F.one_hot(words - FIRST_WORD, WORDS)[:, :, ::2].float()
    features += 0.1 * torch.randn(size, 6, FEATS, generator=g)
    targets = [[START] + words[r, :n].tolist() + [END] for r, n in enumerate(lengths.tolist())]
    return features, targets


def collate_labels(targets):
    width = max(len(t) for t in targets)
    labels = torch.full((len(targets), width), -100)
    for r, t in enumerate(targets):
        labels[r, :len(t)] = torch.tensor(t)
    return labels   # bug: the leading <start> stays; the model prepends its own


class TranscriberModule:
    def __init__(self):
        self.model = Seq2Seq()

    def training_step(self, batch):
        features, targets = batch
        return self.model(features, collate_labels(targets))

    def configure_optimizers(self):
        return torch.optim.AdamW(self.model.parameters(), lr=3e-3)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    module = TranscriberModule()
    optimizer = module.configure_optimizers()
    for step in range(70):
        loss = module.training_step(make_batch(g))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
