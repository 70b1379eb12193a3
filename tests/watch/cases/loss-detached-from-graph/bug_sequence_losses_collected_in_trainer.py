"""A trainer for variable-length sequences scores each sequence in a loop (a GRU over its own length)
and collects the per-sequence errors with torch.tensor(per_sequence), then adds the trainer's own
L2 penalty on the output layer. The copy keeps the errors' values but not their graph, so backward()
trains the output layer toward zero weights and nothing else."""
import torch
from torch import nn


class SequenceRegressor(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.rnn = nn.GRU(1, hidden, batch_first=True)
        self.out = nn.Linear(hidden, 1)

    def forward(self, seq):
        _, h = self.rnn(seq.view(1, -1, 1))
        return self.out(h[-1]).view(())


class SequenceTrainer:
    def __init__(self, model, l2=1e-3, lr=5e-3):
        self.model, self.l2 = model, l2
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    def batch_loss(self, sequences, targets):
        per_sequence = [(self.model(s) - t).pow(2) for s, t in zip(sequences, targets)]
        penalty = self.model.out.weight.pow(2).sum()
        return torch.tensor(per_sequence).mean() + self.l2 * penalty

    def train_step(self, sequences, targets):
        loss = self.batch_loss(sequences, targets)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(4, 12, (480,), generator=g).tolist()
    sequences = [torch.randn(n, generator=g) for n in lengths]
    targets = [s.sum() / 4 for s in sequences]
    trainer = SequenceTrainer(SequenceRegressor())
    for epoch in range(2):
        for i in range(0, len(sequences), 8):
            loss = trainer.train_step(sequences[i:i + 8], targets[i:i + 8])
        print(f"epoch {epoch} loss {loss:.4f}")


if __name__ == "__main__":
    main()
