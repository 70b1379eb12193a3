"""Variable-length sequences batched by a collate function with `pad_sequence` at its default
(batch_first=False), so the batches arrive time-major, (time, batch, features), and the nn.LSTM
keeps batch_first=False to match: the layout is right. Lengths run from 8 to 24 around the batch
size of 16, so some batches are (16, 16, F); packing is left out on purpose (the mean over valid
steps is taken by hand)."""
import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset

FEATURES, CLASSES = 5, 3


class Utterances(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.lengths = torch.randint(8, 25, (n,), generator=g)
        self.labels = torch.randint(0, CLASSES, (n,), generator=g)
        self.items = [torch.randn(int(t), FEATURES, generator=g) + float(c) for t, c in zip(self.lengths, self.labels)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i], self.labels[i]


def collate(batch):
    seqs, labels = zip(*batch)
    lengths = torch.tensor([len(s) for s in seqs])
    return pad_sequence(seqs), lengths, torch.stack(labels)   # (T, B, F)


class Classifier(nn.Module):
    def __init__(self, hidden=24):
        super().__init__()
        self.lstm = nn.LSTM(FEATURES, hidden)
        self.head = nn.Linear(hidden, CLASSES)

    def forward(self, x, lengths):
        out, _ = self.lstm(x)                                   # (T, B, H)
        steps = torch.arange(x.shape[0])[:, None] < lengths[None, :]
        pooled = (out * steps[..., None]).sum(0) / lengths[:, None]
        return self.head(pooled)


def main():
    torch.manual_seed(0)
    loader = DataLoader(Utterances(640, seed=0), batch_size=16, shuffle=True, collate_fn=collate)
    model = Classifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(2):
        for x, lengths, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x, lengths), y)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
