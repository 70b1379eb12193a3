"""An encoder-decoder Transformer written from scratch for teaching: a MultiHeadAttention with one
bias-free qkv_proj (self-attention reshapes it to (N, S, H, 3*d) and chunks; cross-attention
splits the weight into a query part and a key/value part), boolean padding and future masks
applied with masked_fill(-inf), a NoamOpt wrapper around Adam(lr=0, betas=(0.9, 0.98), eps=1e-9)
that sets the rate and steps, and a module-level train(transformer, scheduler, criterion, batches,
masks, n_epochs) fitting a copy task (target = source) with teacher forcing; main() then decodes
held-out sequences greedily.
After scaled_dot_product the values are (N, H, S, d) and are merged with
values.reshape(batch_size, sequence_length, hidden_dim) without permuting the head axis back
behind the sequence axis, so each output token gets chunks of several positions of one head
instead of all heads of its own position (in the decoder, also positions after it).

Thread: https://github.com/jsbaan/transformer-from-scratch/pull/6
"""
import math
import random

import torch
from torch import nn
from torch.nn import functional as F

BOS, EOS, PAD = 0, 1, 2
VOCAB = 14


class MultiHeadAttention(nn.Module):
    def __init__(self, hidden_dim, num_heads):
        super().__init__()
        self.qkv_dim = hidden_dim // num_heads
        self.hidden_dim, self.num_heads = hidden_dim, num_heads
        self.qkv_proj = nn.Linear(hidden_dim, 3 * hidden_dim, bias=False)
        self.o_proj = nn.Linear(hidden_dim, hidden_dim, bias=False)
        nn.init.xavier_uniform_(self.qkv_proj.weight)
        nn.init.xavier_uniform_(self.o_proj.weight)

    def forward(self, x, encoder_hidden_states=None, src_padding_mask=None, future_mask=None):
        batch_size, sequence_length, hidden_dim = x.size()
        if encoder_hidden_states is None:
            qkv = self.qkv_proj(x).reshape(batch_size, sequence_length, self.num_heads, 3 * self.qkv_dim)
            q, k, v = qkv.chunk(3, dim=-1)
        else:
            w_q, w_kv = self.qkv_proj.weight.split([hidden_dim, 2 * hidden_dim])
            src_len = encoder_hidden_states.size(1)
            k, v = F.linear(encoder_hidden_states, w_kv).reshape(
                batch_size, src_len, self.num_heads, 2 * self.qkv_dim).chunk(2, dim=-1)
            q = F.linear(x, w_q).reshape(batch_size, sequence_length, self.num_heads, self.qkv_dim)
        q, k, v = (t.permute(0, 2, 1, 3) for t in (q, k, v))
        values = self.scaled_dot_product(q, k, v, src_padding_mask, future_mask)
        values = values.reshape(batch_size, sequence_length, hidden_dim)
        return self.o_proj(values)

    def scaled_dot_product(self, q, k, v, src_padding_mask=None, future_mask=None):
        logits = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        if future_mask is not None:
            logits = logits.masked_fill(future_mask == 0, float("-inf"))
        if src_padding_mask is not None:
            logits = logits.masked_fill(src_padding_mask[:, None, None, :] == 0, float("-inf"))
        return F.softmax(logits, dim=-1) @ v


class EncoderBlock(nn.Module):
    def __init__(self, hidden_dim, ff_dim, num_heads, dropout_p):
        super().__init__()
        self.mha = MultiHeadAttention(hidden_dim, num_heads)
        self.ff = nn.Sequential(nn.Linear(hidden_dim, ff_dim), nn.ReLU(), nn.Linear(ff_dim, hidden_dim))
        self.ln1, self.ln2 = nn.LayerNorm(hidden_dim), nn.LayerNorm(hidden_dim)
        self.drop = nn.Dropout(dropout_p)

    def forward(self, x, src_padding_mask):
        x = self.ln1(x + self.drop(self.mha(x, src_padding_mask=src_padding_mask)))
        return self.ln2(x + self.drop(self.ff(x)))


class DecoderBlock(nn.Module):
    def __init__(self, hidden_dim, ff_dim, num_heads, dropout_p):
        super().__init__()
        self.self_mha = MultiHeadAttention(hidden_dim, num_heads)
        self.cross_mha = MultiHeadAttention(hidden_dim, num_heads)
        self.ff = nn.Sequential(nn.Linear(hidden_dim, ff_dim), nn.ReLU(), nn.Linear(ff_dim, hidden_dim))
        self.lns = nn.ModuleList([nn.LayerNorm(hidden_dim) for _ in range(3)])
        self.drop = nn.Dropout(dropout_p)

    def forward(self, x, encoder_hidden_states, src_padding_mask, future_mask):
        x = self.lns[0](x + self.drop(self.self_mha(x, future_mask=future_mask)))
        x = self.lns[1](x + self.drop(self.cross_mha(x, encoder_hidden_states, src_padding_mask=src_padding_mask)))
        return self.lns[2](x + self.drop(self.ff(x)))


def sinusoids(length, dim):
    pos = torch.arange(length).float().unsqueeze(1)
    freq = torch.exp(torch.arange(0, dim, 2).float() * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim)
    table[:, 0::2], table[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
    return table


class TransformerEncoder(nn.Module):
    def __init__(self, embedding, hidden_dim, ff_dim, num_heads, num_layers, dropout_p):
        super().__init__()
        self.embed, self.hidden_dim = embedding, hidden_dim
        self.blocks = nn.ModuleList([EncoderBlock(hidden_dim, ff_dim, num_heads, dropout_p) for _ in range(num_layers)])
        self.register_buffer("pe", sinusoids(64, hidden_dim))

    def forward(self, input_ids, src_padding_mask=None):
        x = self.embed(input_ids) * math.sqrt(self.hidden_dim) + self.pe[: input_ids.size(1)]
        for block in self.blocks:
            x = block(x, src_padding_mask)
        return x


class TransformerDecoder(nn.Module):
    def __init__(self, embedding, hidden_dim, ff_dim, num_heads, num_layers, vocab_size, dropout_p):
        super().__init__()
        self.embed, self.hidden_dim = embedding, hidden_dim
        self.blocks = nn.ModuleList([DecoderBlock(hidden_dim, ff_dim, num_heads, dropout_p) for _ in range(num_layers)])
        self.output_layer = nn.Linear(hidden_dim, vocab_size, bias=False)
        self.output_layer.weight = self.embed.weight  # tie_output_to_embedding
        self.register_buffer("pe", sinusoids(64, hidden_dim))

    def forward(self, input_ids, encoder_hidden_states, src_padding_mask=None, future_mask=None):
        x = self.embed(input_ids) * math.sqrt(self.hidden_dim) + self.pe[: input_ids.size(1)]
        for block in self.blocks:
            x = block(x, encoder_hidden_states, src_padding_mask, future_mask)
        return self.output_layer(x)


class Transformer(nn.Module):
    def __init__(self, hidden_dim, ff_dim, num_heads, num_layers, vocab_size, padding_idx, dropout_p):
        super().__init__()
        self.hidden_dim, self.padding_idx = hidden_dim, padding_idx
        self.embed = nn.Embedding(vocab_size, hidden_dim, padding_idx=padding_idx)
        nn.init.normal_(self.embed.weight, std=hidden_dim ** -0.5)
        self.encoder = TransformerEncoder(self.embed, hidden_dim, ff_dim, num_heads, num_layers, dropout_p)
        self.decoder = TransformerDecoder(self.embed, hidden_dim, ff_dim, num_heads, num_layers, vocab_size, dropout_p)


class NoamOpt:
    """Sets the warmup/inverse-sqrt rate on every param group, then steps the wrapped optimizer."""
    def __init__(self, model_size, factor, warmup, optimizer):
        self.optimizer, self._step = optimizer, 0
        self.model_size, self.factor, self.warmup = model_size, factor, warmup

    def rate(self):
        return self.factor * self.model_size ** -0.5 * min(self._step ** -0.5, self._step * self.warmup ** -1.5)

    def step(self):
        self._step += 1
        for group in self.optimizer.param_groups:
            group["lr"] = self.rate()
        self.optimizer.step()


def construct_batches(corpus, batch_size):
    batches, masks = {"src": [], "tgt": []}, {"src": [], "tgt": []}
    for i in range(0, len(corpus), batch_size):
        rows = [[BOS] + s + [EOS] for s in corpus[i:i + batch_size]]
        src = torch.tensor(rows)
        seq_len = src.size(1)
        batches["src"].append(src)
        batches["tgt"].append(src.clone())
        masks["src"].append(src != PAD)
        masks["tgt"].append(torch.triu(torch.ones(seq_len, seq_len), diagonal=1) == 0)
    return batches, masks


def train(transformer, scheduler, criterion, batches, masks, n_epochs):
    transformer.train(True)
    num_iters = 0
    for e in range(n_epochs):
        for src_batch, src_mask, tgt_batch, tgt_mask in zip(batches["src"], masks["src"], batches["tgt"], masks["tgt"]):
            encoder_output = transformer.encoder(src_batch, src_padding_mask=src_mask)
            decoder_output = transformer.decoder(tgt_batch, encoder_output, src_padding_mask=src_mask,
                                                 future_mask=tgt_mask)
            decoder_output = decoder_output[:, :-1, :]
            tgt_batch = tgt_batch[:, 1:]
            batch_loss = criterion(decoder_output.contiguous().permute(0, 2, 1), tgt_batch.contiguous().long())
            batch_accuracy = (decoder_output.argmax(dim=-1) == tgt_batch).float().mean()
            if num_iters % 20 == 0:
                print(f"epoch: {e}, num_iters: {num_iters}, batch_loss: {batch_loss.item():.4f}, "
                      f"batch_accuracy: {batch_accuracy.item():.3f}")
            batch_loss.backward()
            scheduler.step()
            scheduler.optimizer.zero_grad()
            num_iters += 1
    return batch_loss, batch_accuracy


def main():
    torch.manual_seed(0)
    random.seed(0)
    corpus = [[random.randrange(3, VOCAB) for _ in range(10)] for _ in range(600)]
    batches, masks = construct_batches(corpus, batch_size=60)
    transformer = Transformer(hidden_dim=32, ff_dim=64, num_heads=4, num_layers=2, vocab_size=VOCAB,
                              padding_idx=PAD, dropout_p=0.1)
    optimizer = torch.optim.Adam(transformer.parameters(), lr=0, betas=(0.9, 0.98), eps=1e-9)
    scheduler = NoamOpt(transformer.hidden_dim, factor=1, warmup=400, optimizer=optimizer)
    criterion = nn.CrossEntropyLoss()
    loss, acc = train(transformer, scheduler, criterion, batches, masks, n_epochs=12)
    print(f"last batch loss {loss.item():.4f} accuracy {acc.item():.3f}")

    # Greedy decoding of held-out sequences, one token at a time from BOS.
    transformer.eval()
    test = torch.tensor([[BOS] + [random.randrange(3, VOCAB) for _ in range(10)] + [EOS] for _ in range(50)])
    with torch.no_grad():
        memory = transformer.encoder(test, src_padding_mask=test != PAD)
        out = test[:, :1]
        for _ in range(test.size(1) - 1):
            t = out.size(1)
            future = torch.triu(torch.ones(t, t), diagonal=1) == 0
            logits = transformer.decoder(out, memory, src_padding_mask=test != PAD, future_mask=future)
            out = torch.cat([out, logits[:, -1:].argmax(-1)], dim=1)
    print(f"greedy token accuracy on held-out sequences: {(out[:, 1:] == test[:, 1:]).float().mean().item():.3f}")


if __name__ == "__main__":
    main()
