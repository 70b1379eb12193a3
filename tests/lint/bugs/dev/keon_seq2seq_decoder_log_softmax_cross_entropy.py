"""
Shape: A GRU encoder / attention decoder pair wrapped in a Seq2Seq module that writes each decoder
step into a preallocated outputs buffer; module-level train() and evaluate() helpers take the model
and optimizer as parameters and call F.cross_entropy on the flattened buffer.
Bug: AttnDecoder.forward already ends with F.log_softmax over the vocabulary, and those log-probabilities
are then passed to F.cross_entropy, which applies log_softmax again (NLL loss was what was needed).
Thread: https://github.com/keon/seq2seq/issues/4
"""
import math
import random

import torch
from torch import nn, optim
import torch.nn.functional as F
from torch.nn.utils import clip_grad_norm_


class SrcEncoder(nn.Module):
    def __init__(self, src_vocab, emb_dim, hid_dim, n_layers=1, dropout=0.5):
        super().__init__()
        self.hid_dim = hid_dim
        self.embedding = nn.Embedding(src_vocab, emb_dim)
        self.rnn = nn.GRU(emb_dim, hid_dim, n_layers, dropout=dropout, bidirectional=True)

    def forward(self, tokens, state=None):
        emb = self.embedding(tokens)
        seq, state = self.rnn(emb, state)
        seq = seq[:, :, :self.hid_dim] + seq[:, :, self.hid_dim:]
        return seq, state


class AdditiveAttn(nn.Module):
    def __init__(self, hid_dim):
        super().__init__()
        self.proj = nn.Linear(hid_dim * 2, hid_dim)
        self.v = nn.Parameter(torch.rand(hid_dim))
        bound = 1.0 / math.sqrt(hid_dim)
        self.v.data.uniform_(-bound, bound)

    def forward(self, query, memory):
        steps = memory.size(0)
        q = query.repeat(steps, 1, 1).transpose(0, 1)
        mem = memory.transpose(0, 1)
        energy = self.proj(torch.cat([q, mem], dim=2)).transpose(1, 2)
        v = self.v.repeat(mem.size(0), 1).unsqueeze(1)
        scores = torch.bmm(v, energy).squeeze(1)
        return F.softmax(scores, dim=1).unsqueeze(1)


class AttnDecoder(nn.Module):
    def __init__(self, emb_dim, hid_dim, trg_vocab, n_layers=1, dropout=0.2):
        super().__init__()
        self.trg_vocab = trg_vocab
        self.num_layers = n_layers
        self.embedding = nn.Embedding(trg_vocab, emb_dim)
        self.drop = nn.Dropout(dropout, inplace=True)
        self.attn = AdditiveAttn(hid_dim)
        self.rnn = nn.GRU(hid_dim + emb_dim, hid_dim, n_layers, dropout=dropout)
        self.head = nn.Linear(hid_dim * 2, trg_vocab)

    def forward(self, token, prev_state, memory):
        emb = self.drop(self.embedding(token).unsqueeze(0))
        weights = self.attn(prev_state[-1], memory)
        ctx = weights.bmm(memory.transpose(0, 1)).transpose(0, 1)
        out, state = self.rnn(torch.cat([emb, ctx], 2), prev_state)
        logits = self.head(torch.cat([out.squeeze(0), ctx.squeeze(0)], 1))
        return F.log_softmax(logits, dim=1), state, weights


class TranslationModel(nn.Module):
    def __init__(self, enc, dec):
        super().__init__()
        self.enc = enc
        self.dec = dec

    def forward(self, src, trg, teacher_forcing=0.5):
        max_len, batch = trg.size(0), src.size(1)
        outputs = torch.zeros(max_len, batch, self.dec.trg_vocab).cuda()
        memory, state = self.enc(src)
        state = state[:self.dec.num_layers]
        token = trg[0, :]
        for step in range(1, max_len):
            step_out, state, _ = self.dec(token, state, memory)
            outputs[step] = step_out
            best = step_out.max(1)[1]
            token = trg[step] if random.random() < teacher_forcing else best
        return outputs


def evaluate(model, loader, vocab_size, pad_idx):
    model.eval()
    running = 0.0
    with torch.no_grad():
        for batch in loader:
            src, trg = batch.src[0].cuda(), batch.trg[0].cuda()
            out = model(src, trg, teacher_forcing=0.0)
            loss = F.cross_entropy(out[1:].view(-1, vocab_size),
                                   trg[1:].contiguous().view(-1), ignore_index=pad_idx)
            running += loss.item()
    return running / len(loader)


def train(epoch, model, optimizer, loader, vocab_size, clip, pad_idx):
    model.train()
    running = 0.0
    for i, batch in enumerate(loader):
        src, trg = batch.src[0].cuda(), batch.trg[0].cuda()
        optimizer.zero_grad()
        out = model(src, trg)
        loss = F.cross_entropy(out[1:].view(-1, vocab_size),
                               trg[1:].contiguous().view(-1), ignore_index=pad_idx)
        loss.backward()
        clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        running += loss.item()
        if i % 100 == 0 and i:
            print(epoch, i, running / 100)
            running = 0.0


def main(train_iter, val_iter, de_size, en_size, pad_idx, epochs=100, lr=1e-4):
    enc = SrcEncoder(de_size, 256, 512, n_layers=2, dropout=0.5)
    dec = AttnDecoder(256, 512, en_size, n_layers=1, dropout=0.5)
    model = TranslationModel(enc, dec).cuda()
    optimizer = optim.Adam(model.parameters(), lr=lr)
    for epoch in range(1, epochs + 1):
        train(epoch, model, optimizer, train_iter, en_size, 10.0, pad_idx)
        val = evaluate(model, val_iter, en_size, pad_idx)
        print(epoch, val, math.exp(val))
