"""Healthy look-alike of padded-loss-reduction: a token-classification tagger in the BERT style, where
the pad id is 0 and so is the most common tag ("O"). The collate function pads the words with 0 and
the tags with -100, so the padded positions are ignored by cross_entropy; the real "O" tags are
scored as they should be."""
import torch
from torch import nn
from torch.utils.data import DataLoader

PAD, VOCAB, TAGS = 0, 60, 5


def sentences(n, g):
    out = []
    for _ in range(n):
        words = torch.randint(1, VOCAB, (int(torch.randint(5, 17, (1,), generator=g)),), generator=g)
        tags = torch.where(words < 45, torch.zeros_like(words), 1 + (words - 45) % (TAGS - 1))  # mostly "O"
        out.append((words, tags))
    return out


def collate(batch):
    width = max(len(w) for w, _ in batch)
    ids = torch.full((len(batch), width), PAD)
    labels = torch.full((len(batch), width), -100)
    for i, (w, t) in enumerate(batch):
        ids[i, :len(w)], labels[i, :len(t)] = w, t
    return ids, labels


class Tagger(nn.Module):
    def __init__(self, dim=48):
        super().__init__()
        self.embeddings = nn.Embedding(VOCAB, dim, padding_idx=PAD)
        self.encoder = nn.GRU(dim, dim, batch_first=True, bidirectional=True)
        self.classifier = nn.Linear(2 * dim, TAGS)

    def forward(self, ids):
        return self.classifier(self.encoder(self.embeddings(ids))[0])


def main():
    torch.manual_seed(0)
    loader = DataLoader(sentences(1500, torch.Generator().manual_seed(0)), batch_size=32, shuffle=True,
                        collate_fn=collate)
    model = Tagger()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss()  # ignore_index=-100 by default
    for epoch in range(2):
        for ids, labels in loader:
            loss = loss_fn(model(ids).reshape(-1, TAGS), labels.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
