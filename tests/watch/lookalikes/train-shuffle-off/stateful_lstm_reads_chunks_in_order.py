"""Healthy look-alike of train-shuffle-off: a character-level LSTM language model trained with
truncated backpropagation through time. The text is cut into 16 parallel streams, and the
DataLoader yields consecutive 32-character chunks of all streams in order (shuffle=False on
purpose): the hidden state after one batch, detached, is the starting state of the next, so the
order of the batches is part of the method."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

VOCAB, STREAMS, CHUNK = 40, 16, 32


class StreamChunks(Dataset):
    """Item i: chunk i of every stream, (STREAMS, CHUNK) inputs and their next-character targets."""

    def __init__(self, text):
        usable = (len(text) - 1) // STREAMS * STREAMS
        self.streams = text[:usable + 1]
        self.length = usable // STREAMS
        self.n_chunks = (self.length - 1) // CHUNK

    def __len__(self):
        return self.n_chunks

    def __getitem__(self, i):
        starts = torch.arange(STREAMS) * self.length + i * CHUNK
        index = starts.unsqueeze(1) + torch.arange(CHUNK + 1)
        window = self.streams[index]
        return window[:, :-1], window[:, 1:]


class CharLSTM(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.lstm = nn.LSTM(dim, dim, batch_first=True)
        self.out = nn.Linear(dim, VOCAB)

    def forward(self, x, state=None):
        hidden, state = self.lstm(self.embed(x), state)
        return self.out(hidden), state


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(2)
    text = torch.randint(0, VOCAB, (STREAMS * CHUNK * 60 + 1,), generator=g)
    loader = DataLoader(StreamChunks(text), batch_size=None, shuffle=False)
    model = CharLSTM()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    for epoch in range(2):
        state = None
        for x, y in loader:
            logits, state = model(x, state)
            state = tuple(s.detach() for s in state)
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
