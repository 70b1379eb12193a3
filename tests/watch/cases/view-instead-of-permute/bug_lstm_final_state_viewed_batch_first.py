"""A sentiment-style sequence classifier: a bidirectional LSTM reads token embeddings and the head
reads both directions' final hidden states. nn.LSTM returns h_n as (directions, batch, hidden); the
model joins the two directions with `h_n.view(batch, -1)`, which cuts that memory into rows without
moving the batch axis, so row i of the head's input holds halves of other samples' states. A
train(model, loader, optimizer) helper runs the loop; the training loss stalls well above the fixed
twin's."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB, SEQ = 40, 14


class BiLSTMClassifier(nn.Module):
    def __init__(self, vocab=VOCAB, dim=32, hidden=48, classes=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, hidden, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * hidden, classes)

    def forward(self, ids):
        _, (h_n, _) = self.lstm(self.embed(ids))
        both = h_n.view(ids.shape[0], -1)   # bug: (2, B, H) read as (B, 2H) mixes the samples
        return self.head(both)


def make_data(n, g):
    ids = torch.randint(0, VOCAB, (n, SEQ), generator=g)
    labels = ((ids < 10).sum(1) > (ids >= 30).sum(1)).long()   # more "low" tokens than "high" ones
    return ids, labels


def train(model, loader, optimizer, epochs):
    criterion = nn.CrossEntropyLoss()
    for epoch in range(epochs):
        model.train()
        total = 0.0
        for ids, labels in loader:
            optimizer.zero_grad()
            loss = criterion(model(ids), labels)
            loss.backward()
            optimizer.step()
            total += loss.item()
        print(f"epoch {epoch} mean loss {total / len(loader):.4f}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    ids, labels = make_data(1024, g)
    model = BiLSTMClassifier()
    loader = DataLoader(TensorDataset(ids, labels), batch_size=32, shuffle=True)
    train(model, loader, torch.optim.Adam(model.parameters(), lr=3e-3), epochs=2)


if __name__ == "__main__":
    main()
