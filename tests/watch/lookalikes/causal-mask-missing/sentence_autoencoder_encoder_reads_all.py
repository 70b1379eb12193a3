"""A sentence autoencoder: one embedding table serves a bidirectional GRU encoder that reads the
whole sentence into a code, and a GRU decoder that starts from that code and predicts each next
token from the ones before it (teacher forcing on ids[:, :-1], targets ids[:, 1:]). The encoder
sees the future tokens on purpose (the code is the sentence); the decoder is causal."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB, SEQ, DIM = 24, 20, 32


class SentenceAutoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.encoder = nn.GRU(DIM, DIM, batch_first=True, bidirectional=True)
        self.to_code = nn.Linear(2 * DIM, DIM)
        self.decoder = nn.GRU(DIM, DIM, batch_first=True)
        self.out = nn.Linear(DIM, VOCAB)

    def forward(self, ids):
        _, h = self.encoder(self.embed(ids))                      # (2, B, D): both directions' last states
        code = torch.tanh(self.to_code(torch.cat([h[0], h[1]], dim=1)))
        steps, _ = self.decoder(self.embed(ids[:, :-1]), code.unsqueeze(0))
        return self.out(steps)                                    # (B, SEQ - 1, V)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    start = torch.randint(0, VOCAB, (2048, 1), generator=g)
    ids = (start + torch.randint(1, 3, (2048, 1), generator=g) * torch.arange(SEQ)) % VOCAB
    loader = DataLoader(TensorDataset(ids), batch_size=32, shuffle=True)
    model = SentenceAutoencoder()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    for epoch in range(1):
        for (batch,) in loader:
            logits = model(batch)
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
