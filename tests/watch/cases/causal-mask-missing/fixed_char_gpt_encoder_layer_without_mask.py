"""A character-level GPT assembled from nn.TransformerEncoderLayer blocks (batch_first=True, learned
positions), trained on next-character prediction: the loss scores logits[:, :-1] against ids[:, 1:].
Each block gets the square subsequent mask (with is_causal=True as the hint), so position t attends
to positions up to t only. A CharTrainer class owns the loop, AdamW and gradient clipping."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

VOCAB, BLOCK, DIM = 27, 32, 48


def markov_text(n, seed):
    g = torch.Generator().manual_seed(seed)
    table = torch.softmax(3.0 * torch.randn(VOCAB, VOCAB, generator=g), dim=1)
    out = torch.empty(n, dtype=torch.long)
    out[0] = 0
    for i in range(1, n):
        out[i] = torch.multinomial(table[out[i - 1]], 1, generator=g)
    return out


class Chunks(Dataset):
    def __init__(self, text):
        self.text = text

    def __len__(self):
        return len(self.text) // BLOCK - 1

    def __getitem__(self, i):
        return self.text[i * BLOCK:(i + 1) * BLOCK]


class CharGPT(nn.Module):
    def __init__(self, layers=2):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Embedding(BLOCK, DIM)
        self.blocks = nn.ModuleList(nn.TransformerEncoderLayer(DIM, 4, 96, dropout=0.0, batch_first=True)
                                    for _ in range(layers))
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, ids):
        h = self.tok(ids) + self.pos(torch.arange(ids.shape[1]))
        mask = nn.Transformer.generate_square_subsequent_mask(ids.shape[1])
        for block in self.blocks:
            h = block(h, src_mask=mask, is_causal=True)   # fixed: position t attends to <= t only
        return self.head(h)


class CharTrainer:
    def __init__(self, model, loader):
        self.model, self.loader = model, loader
        self.opt = torch.optim.AdamW(model.parameters(), lr=2e-3)

    def train(self, epochs):
        for epoch in range(epochs):
            for ids in self.loader:
                logits = self.model(ids)
                loss = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
                self.opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.opt.step()
            print(f"epoch {epoch} loss {loss.item():.4f}")


def main():
    torch.manual_seed(0)
    loader = DataLoader(Chunks(markov_text(40_000, seed=0)), batch_size=32, shuffle=True)
    CharTrainer(CharGPT(), loader).train(epochs=1)


if __name__ == "__main__":
    main()
