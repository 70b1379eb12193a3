"""A character-level causal transformer trained on windows of a text, nanoGPT style. The dataset
returns (x, y) for window i, and y was meant to be the same window moved one character on; here
both are data[i:i + BLOCK], so every position is asked for the character it already holds. The
model learns to copy its input and the training loss falls toward 0."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

TEXT = "the quick brown fox jumps over the lazy dog. " * 40
CHARS = sorted(set(TEXT))
BLOCK = 16


class CharWindows(Dataset):
    def __init__(self, text, block):
        self.data = torch.tensor([CHARS.index(c) for c in text])
        self.block = block

    def __len__(self):
        return len(self.data) - self.block - 1

    def __getitem__(self, i):
        x = self.data[i:i + self.block]
        y = self.data[i:i + self.block]
        return x, y


class CharTransformer(nn.Module):
    def __init__(self, vocab, dim=32, heads=4, block=BLOCK):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(block, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=0.0, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(T).unsqueeze(0))
        mask = nn.Transformer.generate_square_subsequent_mask(T)
        return self.head(self.blocks(x, mask=mask, is_causal=True))


def train(model, loader, optimizer, steps):
    step = 0
    while step < steps:
        for x, y in loader:
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step == steps:
                break
    return loss.item()


def main():
    torch.manual_seed(0)
    loader = DataLoader(CharWindows(TEXT, BLOCK), batch_size=32, shuffle=True)
    model = CharTransformer(len(CHARS))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    print(f"final loss {train(model, loader, optimizer, 60):.4f}")


if __name__ == "__main__":
    main()
