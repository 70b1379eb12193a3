"""A token tagger (embedding, GRU, linear head) trained by a Trainer class. Its logits come out
as (batch, seq_len, num_tags) and go straight into nn.CrossEntropyLoss with tags of shape
(batch, seq_len). The sequences are 6 tokens long and there are 6 tags, so the shapes pass and
the loss reads the time axis as the classes."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB, TAGS, SEQ = 40, 6, 6


class Tagger(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, TAGS)

    def forward(self, tokens):
        hidden, _ = self.rnn(self.embed(tokens))
        return self.head(hidden)                       # (batch, seq_len, num_tags)


class Trainer:
    def __init__(self, model, loader):
        self.model, self.loader = model, loader
        self.optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
        self.criterion = nn.CrossEntropyLoss()

    def loss(self, tokens, tags):
        return self.criterion(self.model(tokens), tags)

    def train_epoch(self):
        for tokens, tags in self.loader:
            self.optimizer.zero_grad()
            loss = self.loss(tokens, tags)
            loss.backward()
            self.optimizer.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, VOCAB, (640, SEQ), generator=g)
    tags = tokens % TAGS
    trainer = Trainer(Tagger(), DataLoader(TensorDataset(tokens, tags), batch_size=32, shuffle=True))
    for epoch in range(3):
        loss = trainer.train_epoch()
    print(f"loss {loss:.3f}")


if __name__ == "__main__":
    main()
