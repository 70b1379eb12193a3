"""A copy-and-reverse translation model on nn.Transformer: source and target are both 20 tokens,
one shared embedding for both, the decoder input is the target shifted right behind a start id and
the loss scores each decoder position on the next target id. The decoder's self-attention gets the
square subsequent mask; its cross-attention to the source is unmasked, as it should be (the source
is given whole), though source and target have the same length."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB, START, LEN, DIM = 30, 29, 20, 48


class Translator(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Parameter(torch.zeros(1, LEN + 1, DIM))
        self.core = nn.Transformer(DIM, 4, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=96,
                                   dropout=0.0, batch_first=True)
        self.out = nn.Linear(DIM, VOCAB)

    def forward(self, src, tgt_in):
        t = tgt_in.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(t)
        h = self.core(self.embed(src) + self.pos[:, :src.shape[1]], self.embed(tgt_in) + self.pos[:, :t],
                      tgt_mask=mask, tgt_is_causal=True)
        return self.out(h)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    src = torch.randint(0, START, (2048, LEN), generator=g)
    tgt = torch.cat([torch.full((2048, 1), START), src.flip(1)], dim=1)      # (N, LEN + 1)
    loader = DataLoader(TensorDataset(src, tgt), batch_size=32, shuffle=True)
    model = Translator()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for epoch in range(1):
        for s, t in loader:
            logits = model(s, t[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), t[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
