"""
Shape: a minimal-LSTM text classifier. A recurrent cell module lives in its own file; the model class embeds tokens, unrolls the cell over the sequence in a Python loop and feeds the last hidden state to an nn.Sequential head. A single train(batch_size, epochs) function reads a JSON headline dataset, trains a word-level tokenizer from the `tokenizers` package, builds Dataset/DataLoader objects with a padding collate function, creates Adam and the criterion, and runs a per-epoch train loop followed by a validation loop that thresholds torch.sigmoid(outputs) at 0.5.
Bug: the classification head ends in nn.Sigmoid() and the criterion is nn.BCELoss, so the loss is computed on squashed probabilities instead of using BCEWithLogitsLoss on the raw score (the accuracy code even applies sigmoid a second time).
Thread: https://github.com/YecanLee/min-LSTM-torch/pull/1
"""
import json

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace
from tokenizers.trainers import WordLevelTrainer
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset

from min_lstm_cell import MinLSTMCell


class HeadlineRNN(nn.Module):
    def __init__(self, hidden, emb_dim, vocab, max_len):
        super().__init__()
        self.hidden = hidden
        self.max_len = max_len
        self.embed = nn.Embedding(vocab, emb_dim)
        self.cell = MinLSTMCell(hidden, emb_dim)
        self.head = nn.Sequential(
            nn.Linear(hidden, 64),
            nn.Linear(64, 1),
            nn.Sigmoid(),
        )

    def forward(self, tokens):
        h = torch.zeros(tokens.shape[0], self.hidden, device=tokens.device)
        vecs = self.embed(tokens)
        for t in range(vecs.shape[1]):
            h = self.cell(h, vecs[:, t, :])
        return self.head(h)


class HeadlineSet(Dataset):
    def __init__(self, texts, targets, tok):
        self.texts, self.targets, self.tok = texts, targets, tok

    def __len__(self):
        return len(self.texts)

    def __getitem__(self, i):
        ids = self.tok.encode(self.texts[i]).ids
        return torch.tensor(ids, dtype=torch.long), torch.tensor(self.targets[i], dtype=torch.float32)


def pad_batch(items):
    seqs, ys = zip(*items)
    return pad_sequence(seqs, batch_first=True), torch.tensor(ys, dtype=torch.float32)


def build_tokenizer(texts, vocab):
    tok = Tokenizer(WordLevel(unk_token="<OOV>"))
    tok.pre_tokenizer = Whitespace()
    tok.train_from_iterator(texts, WordLevelTrainer(vocab_size=vocab, special_tokens=["<OOV>", "<PAD>"],
                                                    min_frequency=1))
    return tok


def train(batch_size, epochs):
    with open("./data/sarcasm.json") as fh:
        rows = json.load(fh)
    texts = np.array([r["headline"] for r in rows])
    labels = np.array([r["is_sarcastic"] for r in rows])
    cut = int(len(texts) * 0.8)
    tok = build_tokenizer(texts[:cut], len(texts[:cut]))

    train_loader = DataLoader(HeadlineSet(texts[:cut], labels[:cut], tok), batch_size=batch_size,
                              shuffle=True, collate_fn=pad_batch)
    val_loader = DataLoader(HeadlineSet(texts[cut:], labels[cut:], tok), batch_size=batch_size,
                            shuffle=False, collate_fn=pad_batch)

    net = HeadlineRNN(hidden=128, emb_dim=100, vocab=tok.get_vocab_size(), max_len=25)
    opt = optim.Adam(net.parameters(), lr=1e-4)
    loss_fn = nn.BCELoss()
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    net.to(dev)

    for epoch in range(epochs):
        net.train()
        running, hits, seen = 0.0, 0, 0
        for xb, yb in train_loader:
            xb, yb = xb.to(dev), yb.to(dev)
            opt.zero_grad()
            out = net(xb)
            loss = loss_fn(out.squeeze(), yb)
            loss.backward()
            opt.step()
            running += loss.item()
            hits += ((torch.sigmoid(out.squeeze()) >= 0.5).float() == yb).sum().item()
            seen += yb.size(0)
        print(f"epoch {epoch + 1}: loss {running / len(train_loader):.4f} acc {hits / seen:.4f}")

        net.eval()
        v_loss = 0.0
        with torch.no_grad():
            for xb, yb in val_loader:
                xb, yb = xb.to(dev), yb.to(dev)
                v_loss += loss_fn(net(xb).squeeze(), yb).item()
        print(f"val loss {v_loss / len(val_loader):.4f}")


if __name__ == "__main__":
    train(batch_size=64, epochs=100)
