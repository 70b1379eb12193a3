"""An LSTM language-model script in the AWD style: an RNNModel (embedding, LSTM, tied decoder)
whose output goes through a SplitCrossEntropyLoss criterion, an approximate softmax that puts the
frequent words in a head softmax and the rare ones in tail splits, each reached through a
"tombstone" token with its own learnable vector and bias (criterion.tail_vectors,
criterion.tail_bias). The script counts model and criterion parameters together, but builds
the optimizer with torch.optim.SGD(model.parameters(), ...), so the criterion's tombstone
parameters stay at their zero initialisation and the probability given to each tail split is
never learned. train() uses random sequence lengths with a rescaled lr and gradient clipping.

Thread: https://github.com/salesforce/awd-lstm-lm/issues/30
"""
import argparse
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

args = argparse.Namespace(emsize=48, nhid=96, lr=2.0, clip=0.25, bptt=20, batch_size=16, epochs=2,
                          wdecay=1.2e-6, log_interval=20, seed=141)


class SplitCrossEntropyLoss(nn.Module):
    def __init__(self, hidden_size, splits):
        super().__init__()
        self.splits = [0] + splits + [10 ** 8]
        self.nsplits = len(self.splits) - 1
        if self.nsplits > 1:
            self.tail_vectors = nn.Parameter(torch.zeros(self.nsplits - 1, hidden_size))
            self.tail_bias = nn.Parameter(torch.zeros(self.nsplits - 1))

    def logprob(self, weight, bias, hiddens):
        head_w = torch.cat([weight[: self.splits[1]], self.tail_vectors])
        head_b = torch.cat([bias[: self.splits[1]], self.tail_bias])
        head = F.log_softmax(F.linear(hiddens, head_w, head_b), dim=-1)
        parts = [head[:, : -(self.nsplits - 1)]]
        for idx in range(1, self.nsplits):
            start, end = self.splits[idx], min(self.splits[idx + 1], weight.size(0))
            tail = F.log_softmax(F.linear(hiddens, weight[start:end], bias[start:end]), dim=-1)
            parts.append(head[:, -idx].unsqueeze(1) + tail)
        return torch.cat(parts, dim=1)

    def forward(self, weight, bias, hiddens, targets):
        hiddens = hiddens.view(-1, hiddens.size(-1))
        return F.nll_loss(self.logprob(weight, bias, hiddens), targets.view(-1))


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid)
        self.proj = nn.Linear(nhid, ninp)
        self.decoder = nn.Linear(ninp, ntoken)
        self.decoder.weight = self.encoder.weight
        self.drop = nn.Dropout(0.3)

    def forward(self, data, hidden):
        out, hidden = self.rnn(self.drop(self.encoder(data)), hidden)
        return self.drop(self.proj(out)), hidden

    def init_hidden(self, bsz):
        return (torch.zeros(1, bsz, self.rnn.hidden_size), torch.zeros(1, bsz, self.rnn.hidden_size))


def make_corpus(ntokens, length, seed):
    """Zipf-distributed words with a bigram structure, ids sorted by frequency like a real vocab."""
    rng = np.random.default_rng(seed)
    freq = 1.0 / np.arange(1, ntokens + 1)
    freq /= freq.sum()
    successors = rng.choice(ntokens, size=(ntokens, 4), p=freq)
    seq = [0]
    for _ in range(length - 1):
        nxt = successors[seq[-1], rng.integers(4)] if rng.random() < 0.8 else rng.choice(ntokens, p=freq)
        seq.append(int(nxt))
    return torch.tensor(seq)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    return data[: nbatch * bsz].view(bsz, -1).t().contiguous()


def get_batch(source, i, seq_len):
    seq_len = min(seq_len, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].view(-1)


def repackage_hidden(h):
    return tuple(v.detach() for v in h)


def main():
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    ntokens = 600
    corpus = make_corpus(ntokens, 19000, 0)
    train_data = batchify(corpus[:16000], args.batch_size)
    val_data = batchify(corpus[16000:], 10)
    model = RNNModel(ntokens, args.emsize, args.nhid)
    splits = [120, 300]
    criterion = SplitCrossEntropyLoss(args.emsize, splits=splits)
    params = list(model.parameters()) + list(criterion.parameters())
    print("Model total parameters:", sum(p.numel() for p in params))

    def evaluate(source):
        model.eval()
        total, hidden = 0.0, model.init_hidden(10)
        with torch.no_grad():
            for i in range(0, source.size(0) - 1, args.bptt):
                data, targets = get_batch(source, i, args.bptt)
                output, hidden = model(data, hidden)
                total += len(data) * criterion(model.decoder.weight, model.decoder.bias, output, targets).item()
        return total / len(source)

    def train(optimizer, epoch):
        model.train()
        hidden = model.init_hidden(args.batch_size)
        batch, i, total_loss = 0, 0, 0.0
        while i < train_data.size(0) - 1 - 1:
            bptt = args.bptt if np.random.random() < 0.95 else args.bptt / 2.0
            seq_len = max(5, int(np.random.normal(bptt, 5)))
            lr2 = optimizer.param_groups[0]["lr"]
            optimizer.param_groups[0]["lr"] = lr2 * seq_len / args.bptt
            data, targets = get_batch(train_data, i, seq_len)
            hidden = repackage_hidden(hidden)
            optimizer.zero_grad()
            output, hidden = model(data, hidden)
            raw_loss = criterion(model.decoder.weight, model.decoder.bias, output, targets)
            raw_loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            optimizer.step()
            optimizer.param_groups[0]["lr"] = lr2
            total_loss += raw_loss.item()
            if batch % args.log_interval == 0 and batch > 0:
                cur = total_loss / args.log_interval
                print(f"| epoch {epoch} | {batch} batches | lr {lr2:.2f} | loss {cur:5.2f} | ppl {math.exp(cur):8.2f}")
                total_loss = 0.0
            batch += 1
            i += seq_len

    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, weight_decay=args.wdecay)
    for epoch in range(1, args.epochs + 1):
        train(optimizer, epoch)
        val_loss = evaluate(val_data)
        print(f"| end of epoch {epoch} | valid loss {val_loss:5.2f} | valid ppl {math.exp(val_loss):8.2f} "
              f"| tombstone bias {criterion.tail_bias.detach().tolist()}")


if __name__ == "__main__":
    main()
