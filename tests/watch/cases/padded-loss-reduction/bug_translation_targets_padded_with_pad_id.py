"""A toy translation model (GRU encoder-decoder with teacher forcing) trained on pairs of different
lengths. The collate function right-pads sources and targets with PAD = 0, and the decoder input is
[BOS] + target; the criterion is a plain nn.CrossEntropyLoss(), so every padded target position is
scored as "predict PAD": about a third of the positions are padding, which the model learns at once
and which dilutes the loss on the real tokens."""
import torch
from torch import nn
from torch.utils.data import DataLoader

PAD, BOS, VOCAB = 0, 1, 40


def make_pairs(n, g):
    pairs = []
    for _ in range(n):
        src = torch.randint(3, VOCAB, (int(torch.randint(3, 11, (1,), generator=g)),), generator=g)
        pairs.append((src, src.flip(0)))  # the task: reverse the sentence
    return pairs


def collate(batch):
    width_src = max(len(s) for s, _ in batch)
    width_tgt = max(len(t) for _, t in batch) + 1
    src = torch.full((len(batch), width_src), PAD)
    dec_in = torch.full((len(batch), width_tgt), PAD)
    tgt = torch.full((len(batch), width_tgt), PAD)
    for i, (s, t) in enumerate(batch):
        src[i, :len(s)] = s
        dec_in[i, :len(t) + 1] = torch.cat([torch.tensor([BOS]), t])
        tgt[i, :len(t)] = t
    return src, dec_in, tgt


class Seq2Seq(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.src_embed = nn.Embedding(VOCAB, dim, padding_idx=PAD)
        self.tgt_embed = nn.Embedding(VOCAB, dim, padding_idx=PAD)
        self.encoder = nn.GRU(dim, dim, batch_first=True)
        self.decoder = nn.GRU(dim, dim, batch_first=True)
        self.out = nn.Linear(dim, VOCAB)

    def forward(self, src, dec_in):
        _, h = self.encoder(self.src_embed(src))
        hidden, _ = self.decoder(self.tgt_embed(dec_in), h)
        return self.out(hidden)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    loader = DataLoader(make_pairs(1200, g), batch_size=32, shuffle=True, collate_fn=collate)
    model = Seq2Seq()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(2):
        for src, dec_in, tgt in loader:
            logits = model(src, dec_in)
            loss = criterion(logits.reshape(-1, VOCAB), tgt.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
