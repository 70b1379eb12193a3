"""A small text classifier: token ids (batch, seq) are embedded with learned positions and run
through nn.TransformerEncoder, then mean-pooled per sample. The encoder layer is built with
batch_first=True, matching the (batch, seq, dim) embeddings, so self-attention mixes the tokens of
each sentence. The model is handed to a train_epoch(model, loader,
optimizer, scheduler) helper with AdamW and a linear warmup."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB, SEQ, DIM = 50, 24, 32


class TextEncoder(nn.Module):
    def __init__(self, classes=3):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Parameter(torch.zeros(1, SEQ, DIM))
        layer = nn.TransformerEncoderLayer(DIM, nhead=4, dim_feedforward=64, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(DIM, classes)

    def forward(self, ids):
        h = self.embed(ids) + self.pos          # (B, T, D)
        h = self.encoder(h)
        return self.head(h.mean(dim=1))


def make_data(n, g):
    ids = torch.randint(0, VOCAB, (n, SEQ), generator=g)
    labels = (ids[:, :4].sum(1) % 3)
    return ids, labels


def train_epoch(model, loader, optimizer, scheduler):
    model.train()
    for ids, labels in loader:
        loss = nn.functional.cross_entropy(model(ids), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    loader = DataLoader(TensorDataset(*make_data(768, g)), batch_size=32, shuffle=True, drop_last=True)
    model = TextEncoder()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 20))
    for epoch in range(2):
        print(f"epoch {epoch} last loss {train_epoch(model, loader, optimizer, scheduler):.4f}")


if __name__ == "__main__":
    main()
