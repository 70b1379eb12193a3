"""Healthy look-alike of padded-loss-reduction: an autoregressive model over quantized 8x8 glyph images
read row by row. Every glyph leaves its bottom rows blank, so most sequences end in a long run of the
background code 0, exactly where padding would sit; but 0 is real data (the background is blank all
inside the glyphs too) and is rightly a target everywhere."""
import torch
from torch import nn

LEVELS, SIDE = 8, 8


def glyphs(n, g):
    images = torch.zeros(n, SIDE, SIDE, dtype=torch.long)
    for i in range(n):
        h = int(torch.randint(3, 6, (1,), generator=g))
        w = int(torch.randint(5, SIDE + 1, (1,), generator=g))
        images[i, :h, :w] = torch.randint(0, LEVELS, (h, w), generator=g)
    return images.reshape(n, -1)


class PixelLM(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.embed = nn.Embedding(LEVELS + 1, dim)  # + a start code
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, LEVELS)

    def forward(self, codes):
        return self.head(self.rnn(self.embed(codes))[0])


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    data = glyphs(2000, g)
    model = PixelLM()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    criterion = nn.CrossEntropyLoss()
    for step in range(60):
        target = data[torch.randint(0, len(data), (32,), generator=g)]
        inputs = torch.cat([torch.full((32, 1), LEVELS), target[:, :-1]], dim=1)
        loss = criterion(model(inputs).reshape(-1, LEVELS), target.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
