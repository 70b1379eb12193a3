"""A word-level LSTM language model written as a module-level script: batchify() lays the corpus out
in columns, get_batch() cuts bptt-long chunks, train() detaches the hidden state, clips the gradient
and applies a hand-written SGD update, evaluate() reports the validation loss, and the learning rate
is divided by 4 when validation stops improving. The criterion was switched to nn.NLLLoss while the
RNN model still returns the raw output of its decoder Linear (no log_softmax), so the loss printed
goes negative and the perplexity towards 0 while the model learns nothing useful.

Thread: https://github.com/pytorch/examples/issues/734
"""
import math

import torch
from torch import nn

torch.manual_seed(0)
device = torch.device("cpu")

bptt, batch_size, eval_batch_size, clip, epochs = 35, 20, 10, 0.25, 4


def make_corpus(n_tokens, vocab, g):
    # a sparse first-order Markov chain over the vocabulary stands in for a text corpus
    trans = torch.zeros(vocab, vocab)
    for w in range(vocab):
        nxt = torch.randperm(vocab, generator=g)[:4]
        trans[w, nxt] = torch.tensor([0.55, 0.25, 0.12, 0.08])
    ids = torch.empty(n_tokens, dtype=torch.long)
    ids[0] = 0
    for t in range(1, n_tokens):
        ids[t] = torch.multinomial(trans[ids[t - 1]], 1, generator=g)
    return ids


def batchify(ids, bsz):
    n = ids.size(0) // bsz
    return ids[: n * bsz].view(bsz, n).t().contiguous().to(device)


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.2):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nlayers, self.nhid = nlayers, nhid

    def forward(self, x, hidden):
        out, hidden = self.rnn(self.drop(self.encoder(x)), hidden)
        return self.decoder(self.drop(out)), hidden  # raw scores over the vocabulary

    def init_hidden(self, bsz):
        w = next(self.parameters())
        return (w.new_zeros(self.nlayers, bsz, self.nhid), w.new_zeros(self.nlayers, bsz, self.nhid))


g = torch.Generator().manual_seed(0)
ntokens = 60
stream = make_corpus(24000, ntokens, g)
train_data = batchify(stream[:20000], batch_size)
val_data = batchify(stream[20000:], eval_batch_size)

model = RNNModel(ntokens, 32, 64, 2).to(device)
criterion = nn.NLLLoss()


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i):
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].reshape(-1)


def evaluate(source):
    model.eval()
    total = 0.0
    hidden = model.init_hidden(eval_batch_size)
    with torch.no_grad():
        for i in range(0, source.size(0) - 1, bptt):
            data, targets = get_batch(source, i)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            total += len(data) * criterion(output.view(-1, ntokens), targets).item()
    return total / (len(source) - 1)


def train(epoch):
    model.train()
    total_loss = 0.0
    hidden = model.init_hidden(batch_size)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
        data, targets = get_batch(train_data, i)
        model.zero_grad()
        hidden = repackage_hidden(hidden)
        output, hidden = model(data, hidden)
        loss = criterion(output.view(-1, ntokens), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        total_loss += loss.item()
        if batch % 10 == 0 and batch > 0:
            cur = total_loss / 10
            print(f"| epoch {epoch} | batch {batch} | lr {lr:.2f} | loss {cur:6.2f} | ppl {math.exp(cur):8.2f}")
            total_loss = 0.0


lr = 20.0
best_val_loss = None
for epoch in range(1, epochs + 1):
    train(epoch)
    val_loss = evaluate(val_data)
    print(f"| end of epoch {epoch} | valid loss {val_loss:6.2f} | valid ppl {math.exp(val_loss):8.2f}")
    if best_val_loss is None or val_loss < best_val_loss:
        best_val_loss = val_loss
    else:
        lr /= 4.0
