"""A seq2seq character model (copy each input character twice, "abc" -> "aabbcc") built on a
CausalTransformerDecoder: a subclass of nn.TransformerDecoder whose layers are a
CausalTransformerDecoderLayer subclass written for fast cached generation. The library offers no
way to pass a target mask, so during teacher-forced training Model.forward runs the whole shifted
target sequence through the decoder and every decoder position attends to all target positions,
including the ones after it. The token each position must predict is the next decoder input, so
it is visible: the training loss falls towards zero within a few dozen steps while greedy
decoding, which has no future tokens to copy, stays poor.

Thread: https://github.com/alex-matton/causal-transformer-decoder/issues/1
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

CHARS = "qwertyuiopasdfghjklzxcvbnm"
PAD, START, END = 0, 1, 2
VOCAB = 3 + len(CHARS)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=64):
        super().__init__()
        pos = torch.arange(max_len, dtype=torch.float).unsqueeze(1)
        div = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        self.register_buffer("pe", pe.unsqueeze(1))  # len, 1, d

    def forward(self, x):  # len, bsz, d
        return x + self.pe[: x.size(0)]


class CausalTransformerDecoderLayer(nn.TransformerDecoderLayer):
    """Post-norm decoder layer re-implemented by hand (the cache path is not exercised here)."""

    def forward(self, tgt, memory=None, memory_key_padding_mask=None):
        # self-attention over the target sequence: no attn_mask argument exists in this API
        sa = self.self_attn(tgt, tgt, tgt, attn_mask=None)[0]
        tgt = self.norm1(tgt + self.dropout1(sa))
        if memory is not None:
            ca = self.multihead_attn(tgt, memory, memory, key_padding_mask=memory_key_padding_mask)[0]
            tgt = self.norm2(tgt + self.dropout2(ca))
        ff = self.linear2(self.dropout(self.activation(self.linear1(tgt))))
        return self.norm3(tgt + self.dropout3(ff))


class CausalTransformerDecoder(nn.TransformerDecoder):
    def forward(self, tgt, memory=None, memory_key_padding_mask=None):
        out = tgt
        for layer in self.layers:
            out = layer(out, memory, memory_key_padding_mask=memory_key_padding_mask)
        return out


class Model(nn.Module):
    def __init__(self, hdim=48, nhead=4, num_layers=2):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, hdim)
        self.positional_encoding = PositionalEncoding(hdim)
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(hdim, nhead, dim_feedforward=2 * hdim, dropout=0.0),
            num_layers=num_layers, enable_nested_tensor=False)
        self.decoder = CausalTransformerDecoder(
            CausalTransformerDecoderLayer(hdim, nhead, dim_feedforward=2 * hdim, dropout=0.0),
            num_layers=num_layers)
        self.classification_layer = nn.Linear(hdim, VOCAB)

    def encode(self, inputs):
        src = self.positional_encoding(self.embedding(inputs).permute(1, 0, 2))
        mask = inputs == PAD
        return self.encoder(src, src_key_padding_mask=mask), mask

    def forward(self, inputs, teach_forcing_tokens):
        memory, mask = self.encode(inputs)
        tgt = self.positional_encoding(self.embedding(teach_forcing_tokens).permute(1, 0, 2))
        decoded = self.decoder(tgt, memory=memory, memory_key_padding_mask=mask)
        return self.classification_layer(decoded).permute(1, 0, 2)  # bsz, len, vocab

    @torch.no_grad()
    def predict(self, inputs, max_len):
        memory, mask = self.encode(inputs)
        tokens = torch.full((inputs.size(0), 1), START, dtype=torch.long)
        for _ in range(max_len):
            tgt = self.positional_encoding(self.embedding(tokens).permute(1, 0, 2))
            out = self.decoder(tgt, memory=memory, memory_key_padding_mask=mask)
            nxt = self.classification_layer(out[-1]).argmax(-1, keepdim=True)
            tokens = torch.cat([tokens, nxt], dim=1)
        return tokens[:, 1:]


def batch_generator(gen, batch_size=32, max_length=6):
    while True:
        xs, ys = [], []
        for _ in range(batch_size):
            n = int(torch.randint(1, max_length + 1, (1,), generator=gen))
            chars = torch.randint(3, VOCAB, (n,), generator=gen)
            xs.append(chars)
            ys.append(torch.cat([chars.repeat_interleave(2), torch.tensor([END])]))
        x = nn.utils.rnn.pad_sequence(xs, batch_first=True, padding_value=PAD)
        y = nn.utils.rnn.pad_sequence(ys, batch_first=True, padding_value=PAD)
        yield x, y


def greedy_accuracy(model, gen):
    model.eval()
    x, y = next(batch_generator(gen, batch_size=32))
    pred = model.predict(x, y.size(1))
    keep = y != PAD
    acc = (pred[keep] == y[keep]).float().mean().item()
    model.train()
    return acc


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    eval_gen = torch.Generator().manual_seed(1)
    model = Model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for num_step, (inputs, labels) in enumerate(batch_generator(gen)):
        model.train()
        teach_forcing_tokens = torch.cat([torch.full_like(labels[:, :1], START), labels], dim=1)
        optimizer.zero_grad()
        outputs = model(inputs, teach_forcing_tokens)
        loss = F.cross_entropy(outputs[:, :-1].reshape(-1, VOCAB), labels.reshape(-1), ignore_index=PAD)
        loss.backward()
        optimizer.step()
        if num_step % 40 == 0 or num_step == 159:
            print(f"step {num_step:3d}  train loss {loss.item():.4f}  "
                  f"greedy token accuracy {greedy_accuracy(model, eval_gen):.3f}")
        if num_step == 159:
            break


if __name__ == "__main__":
    main()
