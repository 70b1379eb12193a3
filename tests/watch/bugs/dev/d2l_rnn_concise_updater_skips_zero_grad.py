"""A textbook character-level RNN language model: train_ch8(model, train_iter, vocab, lr, num_epochs)
picks an updater and calls train_epoch_ch8(model, train_iter, loss, updater, use_random_iter) each
epoch, which keeps the hidden state across sequential minibatches, clips the gradient norm to 1 and
reports perplexity. For an nn.Module model the updater is a lambda wrapping SGD.step(), so the epoch
loop takes the from-scratch branch (backward, clip, updater) and never calls zero_grad: gradients
pile up from batch to batch for the whole run.

Thread: https://github.com/d2l-ai/d2l-en/pull/1347
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


def make_corpus(n, vocab_size, g):
    # character stream from a sparse Markov chain (stands in for the book's novel)
    nxt = torch.stack([torch.randperm(vocab_size, generator=g)[:3] for _ in range(vocab_size)])
    probs = torch.tensor([0.6, 0.3, 0.1])
    out = [0]
    for _ in range(n - 1):
        k = torch.multinomial(probs, 1, generator=g).item()
        out.append(nxt[out[-1], k].item())
    return out


class SeqDataLoader:
    """Sequential partitioning: consecutive minibatches continue each other's text."""

    def __init__(self, corpus, batch_size, num_steps, g):
        self.corpus, self.batch_size, self.num_steps, self.g = corpus, batch_size, num_steps, g

    def __iter__(self):
        offset = int(torch.randint(0, self.num_steps, (1,), generator=self.g))
        n = ((len(self.corpus) - offset - 1) // self.batch_size) * self.batch_size
        xs = torch.tensor(self.corpus[offset:offset + n]).reshape(self.batch_size, -1)
        ys = torch.tensor(self.corpus[offset + 1:offset + 1 + n]).reshape(self.batch_size, -1)
        for i in range(0, xs.shape[1] // self.num_steps * self.num_steps, self.num_steps):
            yield xs[:, i:i + self.num_steps], ys[:, i:i + self.num_steps]


class RNNModel(nn.Module):
    def __init__(self, rnn_layer, vocab_size):
        super().__init__()
        self.rnn, self.vocab_size = rnn_layer, vocab_size
        self.linear = nn.Linear(rnn_layer.hidden_size, vocab_size)

    def forward(self, inputs, state):
        X = F.one_hot(inputs.T.long(), self.vocab_size).float()
        Y, state = self.rnn(X, state)
        return self.linear(Y.reshape(-1, Y.shape[-1])), state

    def begin_state(self, batch_size):
        return torch.zeros(self.rnn.num_layers, batch_size, self.rnn.hidden_size)


def grad_clipping(net, theta):
    params = [p for p in net.parameters() if p.requires_grad]
    norm = torch.sqrt(sum(torch.sum(p.grad ** 2) for p in params))
    if norm > theta:
        for p in params:
            p.grad[:] *= theta / norm


def sgd(params, lr, batch_size):
    with torch.no_grad():
        for p in params:
            p -= lr * p.grad / batch_size
            p.grad.zero_()


def train_epoch_ch8(model, train_iter, loss, updater, use_random_iter):
    state, total, count = None, 0.0, 0
    for X, Y in train_iter:
        if state is None or use_random_iter:
            state = model.begin_state(batch_size=X.shape[0])
        else:
            state.detach_()
        y = Y.T.reshape(-1)
        y_hat, state = model(X, state)
        l = loss(y_hat, y.long()).mean()
        if isinstance(updater, torch.optim.Optimizer):
            updater.zero_grad()
            l.backward()
            grad_clipping(model, 1)
            updater.step()
        else:
            l.backward()
            grad_clipping(model, 1)
            updater(batch_size=1)
        total += l.item() * y.numel()
        count += y.numel()
    return math.exp(total / count)


def train_ch8(model, train_iter, vocab, lr, num_epochs, use_random_iter=False):
    loss = nn.CrossEntropyLoss()
    if isinstance(model, nn.Module):
        trainer = torch.optim.SGD(model.parameters(), lr)
        updater = lambda batch_size: trainer.step()
    else:
        updater = lambda batch_size: sgd(model.params, lr, batch_size)
    for epoch in range(num_epochs):
        ppl = train_epoch_ch8(model, train_iter, loss, updater, use_random_iter)
        if (epoch + 1) % 5 == 0:
            print(f"epoch {epoch + 1}: perplexity {ppl:.2f}")


if __name__ == "__main__":
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    vocab = [chr(ord("a") + i) for i in range(26)] + [" ", "<unk>"]
    corpus = make_corpus(6000, len(vocab), g)
    train_iter = SeqDataLoader(corpus, batch_size=32, num_steps=35, g=g)
    net = RNNModel(nn.RNN(len(vocab), 64), len(vocab))
    train_ch8(net, train_iter, vocab, lr=1.0, num_epochs=15)
