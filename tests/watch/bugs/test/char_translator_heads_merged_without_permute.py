"""A character-level English-to-"Kannada" translator written from scratch in the layout of a video
course: a SentenceEmbedding that tokenizes raw strings inside forward() and adds a sinusoidal
PositionalEncoding, a MultiHeadAttention with one qkv_layer (reshape to (B, L, H, 3*d), permute to
(B, H, L, 3*d), chunk), a MultiHeadCrossAttention with a kv_layer and a q_layer, a scaled_dot_product
that adds an additive -1e9 mask, hand-written LayerNormalization, encoder and decoder stacks, and
a notebook-style loop: create_masks(eng_batch, kn_batch) per batch, CrossEntropyLoss(ignore_index=
pad, reduction='none') summed over non-pad labels, Adam, zero_grad/backward/step.
After attention both attention modules merge the heads with values.reshape(batch, length, d_model)
straight from (B, H, L, d), without permuting the head axis back behind the length axis, so each
output row is a slab of one head's values over several positions (in the decoder, future ones too).

Thread: https://github.com/ajhalthor/Transformer-Neural-Network/issues/1
"""
import math

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

START_TOKEN, END_TOKEN, PADDING_TOKEN = "<s>", "</s>", "<p>"
ENG_CHARS = list("abcdefghijklmnop ")
KN_CHARS = list("ABCDEFGHIJKLMNOP_")
max_sequence_length = 16
NEG_INFTY = -1e9


def build_vocab(chars):
    itos = [START_TOKEN] + chars + [END_TOKEN, PADDING_TOKEN]
    return {t: i for i, t in enumerate(itos)}, itos


english_to_index, _ = build_vocab(ENG_CHARS)
kannada_to_index, index_to_kannada = build_vocab(KN_CHARS)


def scaled_dot_product(q, k, v, mask=None):
    d_k = q.size(-1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(d_k)
    if mask is not None:
        scores = (scores.permute(1, 0, 2, 3) + mask).permute(1, 0, 2, 3)
    attention = F.softmax(scores, dim=-1)
    return attention @ v, attention


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_sequence_length):
        super().__init__()
        self.d_model, self.max_sequence_length = d_model, max_sequence_length

    def forward(self):
        i = torch.arange(0, self.d_model, 2).float()
        denom = torch.pow(10000, i / self.d_model)
        pos = torch.arange(self.max_sequence_length).float().unsqueeze(1)
        return torch.stack([torch.sin(pos / denom), torch.cos(pos / denom)], dim=2).flatten(1)


class SentenceEmbedding(nn.Module):
    def __init__(self, max_sequence_length, d_model, language_to_index):
        super().__init__()
        self.max_sequence_length = max_sequence_length
        self.language_to_index = language_to_index
        self.embedding = nn.Embedding(len(language_to_index), d_model)
        self.position_encoder = PositionalEncoding(d_model, max_sequence_length)
        self.dropout = nn.Dropout(0.1)

    def batch_tokenize(self, batch, start_token, end_token):
        rows = []
        for sentence in batch:
            ids = [self.language_to_index[c] for c in sentence]
            if start_token:
                ids.insert(0, self.language_to_index[START_TOKEN])
            if end_token:
                ids.append(self.language_to_index[END_TOKEN])
            ids += [self.language_to_index[PADDING_TOKEN]] * (self.max_sequence_length - len(ids))
            rows.append(torch.tensor(ids))
        return torch.stack(rows)

    def forward(self, x, start_token, end_token):
        x = self.embedding(self.batch_tokenize(x, start_token, end_token))
        return self.dropout(x + self.position_encoder())


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.qkv_layer = nn.Linear(d_model, 3 * d_model)
        self.linear_layer = nn.Linear(d_model, d_model)

    def forward(self, x, mask):
        batch_size, sequence_length, d_model = x.size()
        qkv = self.qkv_layer(x).reshape(batch_size, sequence_length, self.num_heads, 3 * self.head_dim)
        q, k, v = qkv.permute(0, 2, 1, 3).chunk(3, dim=-1)
        values, _ = scaled_dot_product(q, k, v, mask)
        values = values.reshape(batch_size, sequence_length, self.num_heads * self.head_dim)
        return self.linear_layer(values)


class MultiHeadCrossAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.kv_layer = nn.Linear(d_model, 2 * d_model)
        self.q_layer = nn.Linear(d_model, d_model)
        self.linear_layer = nn.Linear(d_model, d_model)

    def forward(self, x, y, mask):
        batch_size, sequence_length, d_model = x.size()
        kv = self.kv_layer(x).reshape(batch_size, sequence_length, self.num_heads, 2 * self.head_dim)
        q = self.q_layer(y).reshape(batch_size, sequence_length, self.num_heads, self.head_dim)
        k, v = kv.permute(0, 2, 1, 3).chunk(2, dim=-1)
        values, _ = scaled_dot_product(q.permute(0, 2, 1, 3), k, v, mask)
        values = values.reshape(batch_size, sequence_length, d_model)
        return self.linear_layer(values)


class LayerNormalization(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(d_model))
        self.beta = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return self.gamma * (x - mean) / (var + self.eps).sqrt() + self.beta


class PositionwiseFeedForward(nn.Sequential):
    def __init__(self, d_model, hidden, drop_prob):
        super().__init__(nn.Linear(d_model, hidden), nn.ReLU(), nn.Dropout(drop_prob), nn.Linear(hidden, d_model))


class EncoderLayer(nn.Module):
    def __init__(self, d_model, ffn_hidden, num_heads, drop_prob):
        super().__init__()
        self.attention = MultiHeadAttention(d_model, num_heads)
        self.norm1, self.norm2 = LayerNormalization(d_model), LayerNormalization(d_model)
        self.ffn = PositionwiseFeedForward(d_model, ffn_hidden, drop_prob)
        self.drop = nn.Dropout(drop_prob)

    def forward(self, x, mask):
        x = self.norm1(x + self.drop(self.attention(x, mask)))
        return self.norm2(x + self.drop(self.ffn(x)))


class DecoderLayer(nn.Module):
    def __init__(self, d_model, ffn_hidden, num_heads, drop_prob):
        super().__init__()
        self.self_attention = MultiHeadAttention(d_model, num_heads)
        self.cross_attention = MultiHeadCrossAttention(d_model, num_heads)
        self.norms = nn.ModuleList([LayerNormalization(d_model) for _ in range(3)])
        self.ffn = PositionwiseFeedForward(d_model, ffn_hidden, drop_prob)
        self.drop = nn.Dropout(drop_prob)

    def forward(self, x, y, self_mask, cross_mask):
        y = self.norms[0](y + self.drop(self.self_attention(y, self_mask)))
        y = self.norms[1](y + self.drop(self.cross_attention(x, y, cross_mask)))
        return self.norms[2](y + self.drop(self.ffn(y)))


class Transformer(nn.Module):
    def __init__(self, d_model, ffn_hidden, num_heads, drop_prob, num_layers, max_sequence_length,
                 kn_vocab_size, english_to_index, kannada_to_index):
        super().__init__()
        self.enc_embedding = SentenceEmbedding(max_sequence_length, d_model, english_to_index)
        self.dec_embedding = SentenceEmbedding(max_sequence_length, d_model, kannada_to_index)
        self.encoder_layers = nn.ModuleList([EncoderLayer(d_model, ffn_hidden, num_heads, drop_prob)
                                             for _ in range(num_layers)])
        self.decoder_layers = nn.ModuleList([DecoderLayer(d_model, ffn_hidden, num_heads, drop_prob)
                                             for _ in range(num_layers)])
        self.linear = nn.Linear(d_model, kn_vocab_size)

    def forward(self, eng_batch, kn_batch, enc_mask, dec_self_mask, dec_cross_mask,
                dec_start_token=True, dec_end_token=True):
        x = self.enc_embedding(eng_batch, False, False)
        for layer in self.encoder_layers:
            x = layer(x, enc_mask)
        y = self.dec_embedding(kn_batch, dec_start_token, dec_end_token)
        for layer in self.decoder_layers:
            y = layer(x, y, dec_self_mask, dec_cross_mask)
        return self.linear(y)


def create_masks(eng_batch, kn_batch):
    n = len(eng_batch)
    look_ahead = torch.triu(torch.full([max_sequence_length, max_sequence_length], True), diagonal=1)
    enc_pad = torch.full([n, max_sequence_length, max_sequence_length], False)
    dec_pad_self = torch.full([n, max_sequence_length, max_sequence_length], False)
    dec_pad_cross = torch.full([n, max_sequence_length, max_sequence_length], False)
    for i in range(n):
        eng_pad = np.arange(len(eng_batch[i]) + 1, max_sequence_length)
        kn_pad = np.arange(len(kn_batch[i]) + 1, max_sequence_length)
        enc_pad[i, :, eng_pad] = True
        enc_pad[i, eng_pad, :] = True
        dec_pad_self[i, :, kn_pad] = True
        dec_pad_self[i, kn_pad, :] = True
        dec_pad_cross[i, :, eng_pad] = True
        dec_pad_cross[i, kn_pad, :] = True
    return (torch.where(enc_pad, NEG_INFTY, 0.0),
            torch.where(look_ahead | dec_pad_self, NEG_INFTY, 0.0),
            torch.where(dec_pad_cross, NEG_INFTY, 0.0))


class PairDataset(torch.utils.data.Dataset):
    """Sentences over a small alphabet; the "translation" maps each character through a fixed
    table."""
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        table = dict(zip(ENG_CHARS, KN_CHARS))
        self.pairs = []
        for _ in range(n):
            words = ["".join(ENG_CHARS[int(j)] for j in torch.randint(16, (int(torch.randint(2, 6, (1,), generator=g)),),
                                                                      generator=g))
                     for _ in range(int(torch.randint(2, 4, (1,), generator=g)))]
            eng = " ".join(words)[: max_sequence_length - 2]
            kn = "".join(table[c] for c in eng)
            self.pairs.append((eng, kn))

    def __len__(self):
        return len(self.pairs)

    def __getitem__(self, i):
        return self.pairs[i]


torch.manual_seed(0)
train_loader = torch.utils.data.DataLoader(PairDataset(900, seed=1), batch_size=30, shuffle=True)
kn_vocab_size = len(kannada_to_index)
transformer = Transformer(32, 64, 4, 0.1, 1, max_sequence_length, kn_vocab_size, english_to_index, kannada_to_index)
criterian = nn.CrossEntropyLoss(ignore_index=kannada_to_index[PADDING_TOKEN], reduction="none")
for params in transformer.parameters():
    if params.dim() > 1:
        nn.init.xavier_uniform_(params)
optim = torch.optim.Adam(transformer.parameters(), lr=2e-3)

for epoch in range(8):
    for batch_num, (eng_batch, kn_batch) in enumerate(train_loader):
        transformer.train()
        enc_mask, dec_self_mask, dec_cross_mask = create_masks(eng_batch, kn_batch)
        optim.zero_grad()
        kn_predictions = transformer(eng_batch, kn_batch, enc_mask, dec_self_mask, dec_cross_mask,
                                     dec_start_token=True, dec_end_token=True)
        labels = transformer.dec_embedding.batch_tokenize(kn_batch, start_token=False, end_token=True)
        loss = criterian(kn_predictions.view(-1, kn_vocab_size), labels.view(-1))
        valid = labels.view(-1) != kannada_to_index[PADDING_TOKEN]
        loss = loss.sum() / valid.sum()
        loss.backward()
        optim.step()
        if batch_num % 10 == 0:
            print(f"epoch {epoch} iteration {batch_num}: loss {loss.item():.4f}")

# Greedy translation of a few training sentences, one character at a time.
transformer.eval()
hits = 0
with torch.no_grad():
    for eng, kn in train_loader.dataset.pairs[:20]:
        out = ""
        for t in range(max_sequence_length - 1):
            masks = create_masks((eng,), (out,))
            pred = transformer((eng,), (out,), *masks, dec_start_token=True, dec_end_token=False)
            nxt = index_to_kannada[int(pred[0, t].argmax())]
            if nxt == END_TOKEN:
                break
            out += nxt if nxt not in (START_TOKEN, PADDING_TOKEN) else ""
        hits += int(out == kn)
print(f"exact greedy translations: {hits}/20")
