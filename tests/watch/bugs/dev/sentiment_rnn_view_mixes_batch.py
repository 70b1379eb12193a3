"""A course-style movie-review sentiment LSTM: SentimentRNN (Embedding, two-layer batch-first LSTM
with dropout, Linear to two classes) keeps an explicit hidden state made by init_hidden(batch_size)
and re-wrapped with .data every batch; the loop zeroes grads, clips to norm 5, steps Adam, and
every few steps computes a validation loss in eval mode. forward() applies the Linear to all time
steps, then takes "the last step" with out.view(-1, batch_size, n_classes)[0]. The output is laid
out (batch, seq_len, classes), so that view reads the first batch_size time steps of the first
review in the batch: every review in the batch is scored from review 0's early outputs, and the
model cannot learn the labels.

Thread: https://github.com/udacity/deep-learning-v2-pytorch/issues/9
"""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class SentimentRNN(nn.Module):
    def __init__(self, vocab_size, output_size, embedding_dim, hidden_dim, n_layers, drop_prob=0.5):
        super().__init__()
        self.output_size = output_size
        self.n_layers = n_layers
        self.hidden_dim = hidden_dim
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        self.lstm = nn.LSTM(embedding_dim, hidden_dim, n_layers, dropout=drop_prob, batch_first=True)
        self.fc = nn.Linear(hidden_dim, output_size)

    def forward(self, x, hidden):
        batch_size = x.size(0)
        embeds = self.embedding(x)
        lstm_out, hidden = self.lstm(embeds, hidden)
        out = self.fc(lstm_out)                          # (batch, seq_len, classes)
        out = out.view(-1, batch_size, self.output_size)  # meant as (seq_len, batch, classes)
        out = out[0]                                      # meant as the last step of each review
        return out, hidden

    def init_hidden(self, batch_size):
        weight = next(self.parameters()).data
        return (weight.new(self.n_layers, batch_size, self.hidden_dim).zero_(),
                weight.new(self.n_layers, batch_size, self.hidden_dim).zero_())


def reviews(n, seq_len, vocab, seed):
    """Left-padded token ids; label 1 when the review holds more 'positive' than 'negative' words."""
    rng = np.random.default_rng(seed)
    pos_words, neg_words = np.arange(1, 31), np.arange(31, 61)
    x = np.zeros((n, seq_len), dtype=np.int64)
    y = np.zeros(n, dtype=np.int64)
    for i in range(n):
        length = rng.integers(seq_len // 2, seq_len + 1)
        words = rng.integers(61, vocab, size=length)
        n_pos, n_neg = rng.integers(0, 6, size=2)
        if n_pos == n_neg:
            n_pos += 1
        slots = rng.choice(length, size=n_pos + n_neg, replace=False)
        words[slots[:n_pos]] = rng.choice(pos_words, size=n_pos)
        words[slots[n_pos:]] = rng.choice(neg_words, size=n_neg)
        x[i, seq_len - length:] = words
        y[i] = int(n_pos > n_neg)
    return TensorDataset(torch.from_numpy(x), torch.from_numpy(y))


def main():
    torch.manual_seed(0)
    vocab_size, seq_len, batch_size = 800, 60, 50
    train_loader = DataLoader(reviews(2000, seq_len, vocab_size, 0), shuffle=True, batch_size=batch_size,
                              generator=torch.Generator().manual_seed(0))
    valid_loader = DataLoader(reviews(500, seq_len, vocab_size, 1), batch_size=batch_size)

    net = SentimentRNN(vocab_size, output_size=2, embedding_dim=64, hidden_dim=64, n_layers=2)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(net.parameters(), lr=0.001)

    epochs, counter, print_every, clip = 2, 0, 20, 5
    net.train()
    for e in range(epochs):
        h = net.init_hidden(batch_size)
        for inputs, labels in train_loader:
            counter += 1
            h = tuple([each.data for each in h])
            net.zero_grad()
            output, h = net(inputs, h)
            loss = criterion(output, labels)
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), clip)
            optimizer.step()

            if counter % print_every == 0:
                val_h = net.init_hidden(batch_size)
                val_losses, correct = [], 0
                net.eval()
                with torch.no_grad():
                    for v_inputs, v_labels in valid_loader:
                        val_h = tuple([each.data for each in val_h])
                        v_out, val_h = net(v_inputs, val_h)
                        val_losses.append(criterion(v_out, v_labels).item())
                        correct += (v_out.argmax(1) == v_labels).sum().item()
                net.train()
                print(f"Epoch {e + 1}/{epochs} step {counter} loss {loss.item():.4f} "
                      f"val loss {np.mean(val_losses):.4f} val acc {correct / len(valid_loader.dataset):.3f}")


if __name__ == "__main__":
    main()
