"""A textbook chapter on sentiment analysis with an LSTM: reviews come from a dataset iterator as
(label, text) pairs, a tokenizer and a vocabulary turn text into ids, a collate_batch function pads
the ids and builds float labels with `1. if label == 'pos' else 0.`, and the RNN model (embedding
with padding_idx 0, packed LSTM, fc-ReLU-fc-sigmoid) is trained with BCELoss and Adam by module-level
train(dataloader) / evaluate(dataloader) functions that print accuracy per epoch. The dataset now
yields the labels as the integers 1 and 2 instead of the strings 'pos' and 'neg', so the comparison
is never true, every label becomes 0, and training and validation accuracy read 100%.

Thread: https://github.com/rasbt/machine-learning-book/issues/135
"""
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_sequence
from torch.utils.data import DataLoader

POSITIVE = ["great", "wonderful", "loved", "superb", "moving", "fun"]
NEGATIVE = ["awful", "boring", "hated", "dull", "mess", "weak"]
NEUTRAL = ["the", "film", "plot", "actor", "scene", "was", "and", "a", "story", "it", "very", "quite"]


def review_iter(n, seed):
    g = torch.Generator().manual_seed(seed)
    rows = []
    for _ in range(n):
        label = 1 + int(torch.randint(0, 2, (1,), generator=g))  # 1 = positive, 2 = negative
        cue = POSITIVE if label == 1 else NEGATIVE
        length = int(torch.randint(8, 24, (1,), generator=g))
        words = []
        for _ in range(length):
            pool = cue if float(torch.rand(1, generator=g)) < 0.2 else NEUTRAL
            words.append(pool[int(torch.randint(0, len(pool), (1,), generator=g))])
        rows.append((label, " ".join(words)))
    return rows


def tokenizer(text):
    return text.lower().split()


vocab = {"<pad>": 0, "<unk>": 1}
for word in NEUTRAL + POSITIVE + NEGATIVE:
    vocab[word] = len(vocab)


def text_pipeline(text):
    return [vocab.get(tok, 1) for tok in tokenizer(text)]


def label_pipeline(label):
    return 1. if label == 'pos' else 0.


def collate_batch(batch):
    label_list, text_list, lengths = [], [], []
    for _label, _text in batch:
        label_list.append(label_pipeline(_label))
        processed = torch.tensor(text_pipeline(_text), dtype=torch.int64)
        text_list.append(processed)
        lengths.append(processed.size(0))
    label_list = torch.tensor(label_list)
    lengths = torch.tensor(lengths)
    padded = pad_sequence(text_list, batch_first=True)
    return padded, label_list, lengths


class RNN(nn.Module):
    def __init__(self, vocab_size, embed_dim, rnn_hidden_size, fc_hidden_size):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        self.rnn = nn.LSTM(embed_dim, rnn_hidden_size, batch_first=True)
        self.fc1 = nn.Linear(rnn_hidden_size, fc_hidden_size)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(fc_hidden_size, 1)
        self.sigmoid = nn.Sigmoid()

    def forward(self, text, lengths):
        out = self.embedding(text)
        out = pack_padded_sequence(out, lengths.numpy(), enforce_sorted=False, batch_first=True)
        out, (hidden, cell) = self.rnn(out)
        out = hidden[-1, :, :]
        out = self.relu(self.fc1(out))
        return self.sigmoid(self.fc2(out))


torch.manual_seed(1)
model = RNN(len(vocab), embed_dim=20, rnn_hidden_size=32, fc_hidden_size=32)
loss_fn = nn.BCELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=0.001)


def train(dataloader):
    model.train()
    total_acc, total_loss = 0, 0
    for text_batch, label_batch, lengths in dataloader:
        optimizer.zero_grad()
        pred = model(text_batch, lengths)[:, 0]
        loss = loss_fn(pred, label_batch)
        loss.backward()
        optimizer.step()
        total_acc += ((pred >= 0.5).float() == label_batch).float().sum().item()
        total_loss += loss.item() * label_batch.size(0)
    return total_acc / len(dataloader.dataset), total_loss / len(dataloader.dataset)


def evaluate(dataloader):
    model.eval()
    total_acc, total_loss = 0, 0
    with torch.no_grad():
        for text_batch, label_batch, lengths in dataloader:
            pred = model(text_batch, lengths)[:, 0]
            loss = loss_fn(pred, label_batch)
            total_acc += ((pred >= 0.5).float() == label_batch).float().sum().item()
            total_loss += loss.item() * label_batch.size(0)
    return total_acc / len(dataloader.dataset), total_loss / len(dataloader.dataset)


def main():
    train_dataset = review_iter(1600, seed=2)
    valid_dataset = review_iter(400, seed=3)
    batch_size = 32
    train_dl = DataLoader(train_dataset, batch_size=batch_size, shuffle=True, collate_fn=collate_batch,
                          generator=torch.Generator().manual_seed(0))
    valid_dl = DataLoader(valid_dataset, batch_size=batch_size, shuffle=False, collate_fn=collate_batch)
    num_epochs = 3
    for epoch in range(num_epochs):
        acc_train, loss_train = train(train_dl)
        acc_valid, loss_valid = evaluate(valid_dl)
        print(f"Epoch {epoch} accuracy: {acc_train:.4f} val_accuracy: {acc_valid:.4f}")


if __name__ == "__main__":
    main()
