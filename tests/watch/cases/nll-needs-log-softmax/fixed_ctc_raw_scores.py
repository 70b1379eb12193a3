"""The same recognizer with log_softmax over the symbols before nn.CTCLoss, as it expects."""
import torch
from torch import nn


class Recognizer(nn.Module):
    def __init__(self, features=20, hidden=48, symbols=12):
        super().__init__()
        self.rnn = nn.GRU(features, hidden, batch_first=False)
        self.head = nn.Linear(hidden, symbols)

    def forward(self, frames):              # frames: (T, N, features)
        out, _ = self.rnn(frames)
        return self.head(out).log_softmax(-1)  # (T, N, symbols): log-probabilities


def batch(g, n=16, frames=40, length=8, symbols=12, features=20):
    targets = torch.randint(1, symbols, (n, length), generator=g)
    x = torch.randn(frames, n, features, generator=g) * 0.5
    x[: length * 4 : 4, :, :] += nn.functional.one_hot(targets.T, features).float()[:, :, :features] * 2
    return x, targets, torch.full((n,), frames, dtype=torch.long), torch.full((n,), length, dtype=torch.long)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = Recognizer()
    ctc = nn.CTCLoss(blank=0, zero_infinity=True)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for step in range(70):
        x, y, x_len, y_len = batch(g)
        loss = ctc(model(x), y, x_len, y_len)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"ctc {loss.item():.3f}")


if __name__ == "__main__":
    main()
