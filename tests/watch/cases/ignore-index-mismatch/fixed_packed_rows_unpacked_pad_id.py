"""Pretraining a small language model on packed rows: the dataset packs whole documents into rows of
at most ROW_LEN tokens and builds the next-token labels document by document, with -100 on each
document's last position so that no document predicts the first token of the next. A trainer class
unpacks each batch into one row per document for the model; the fix pads the ids with the pad id and
the labels with -100, the loss's ignore_index, so neither the document ends nor the padding are
targets."""
import torch
from torch import nn

VOCAB, PAD_ID, ROW_LEN = 40, 0, 48


class PackedDocs(torch.utils.data.Dataset):
    def __init__(self, n_rows, seed):
        g = torch.Generator().manual_seed(seed)
        self.rows = []
        for _ in range(n_rows):
            docs, used = [], 0
            while True:
                length = int(torch.randint(4, 20, (1,), generator=g))
                if used + length > ROW_LEN:
                    break
                start = int(torch.randint(1, VOCAB, (1,), generator=g))
                docs.append([1 + (start + 3 * k) % (VOCAB - 1) for k in range(length)])
                used += length
            self.rows.append(docs)

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        docs = self.rows[i]
        return [(doc, doc[1:] + [-100]) for doc in docs]


def collate(rows):
    return [pair for row in rows for pair in row]


class Trainer:
    def __init__(self, model, lr=3e-3):
        self.model = model
        self.criterion = nn.CrossEntropyLoss(ignore_index=-100)
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)

    @staticmethod
    def unpack(pairs):
        width = max(len(ids) for ids, _ in pairs)
        ids = torch.full((len(pairs), width), PAD_ID)
        labels = torch.full((len(pairs), width), -100)
        for row, (doc, lab) in enumerate(pairs):
            ids[row, :len(doc)] = torch.tensor(doc)
            labels[row, :len(lab)] = torch.tensor(lab)
        return ids, labels

    def step(self, pairs):
        ids, labels = self.unpack(pairs)
        logits = self.model(ids)
        loss = self.criterion(logits.reshape(-1, VOCAB), labels.reshape(-1))
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def fit(self, loader, epochs):
        for epoch in range(epochs):
            for pairs in loader:
                last = self.step(pairs)
            print(f"epoch {epoch} loss {last:.3f}")


class Decoder(nn.Module):
    def __init__(self, dim=48):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.lstm = nn.LSTM(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, VOCAB)

    def forward(self, ids):
        return self.head(self.lstm(self.embed(ids))[0])


def main():
    torch.manual_seed(0)
    loader = torch.utils.data.DataLoader(PackedDocs(480, seed=0), batch_size=4, shuffle=True, collate_fn=collate,
                                         generator=torch.Generator().manual_seed(0))
    Trainer(Decoder()).fit(loader, epochs=1)


if __name__ == "__main__":
    main()
