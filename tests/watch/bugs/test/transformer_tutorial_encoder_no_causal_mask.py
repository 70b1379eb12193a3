"""Word-level language modelling in the style of the PyTorch nn.Transformer tutorial: a
TransformerModel (embedding, sinusoidal PositionalEncoding, nn.TransformerEncoder, linear decoder)
over a token stream batchified to [seq_len, batch], get_batch() cutting bptt-long chunks with the
target one step ahead, a module-level train(model) with CrossEntropyLoss, SGD(lr=5.0), gradient
clipping at 0.5 and StepLR(gamma=0.95) stepped per epoch, and evaluate(model, data) per epoch.
forward(src, src_mask=None) is called as model(data) and the encoder gets no mask, so it is
bidirectional: every position attends to the token it is asked to predict. Training and validation
perplexity fall far below what the stream allows, yet predicting the next token from a prefix is
poor.

Thread: https://github.com/pytorch/tutorials/issues/2478
"""
import math

import torch
from torch import nn, Tensor
from torch.nn import TransformerEncoder, TransformerEncoderLayer

VOCAB = 40


def token_stream(n, seed):
    """Half the tokens follow a fixed successor table, half are uniform: about 2.5 nats per token is
    the best possible loss, and at most about 51% of next tokens can be guessed."""
    g = torch.Generator().manual_seed(seed)
    succ = torch.randperm(VOCAB, generator=torch.Generator().manual_seed(11))
    out = [0]
    for _ in range(n - 1):
        if float(torch.rand(1, generator=g)) < 0.5:
            out.append(int(torch.randint(VOCAB, (1,), generator=g)))
        else:
            out.append(int(succ[out[-1]]))
    return torch.tensor(out)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=512):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pos = torch.arange(max_len).unsqueeze(1)
        freq = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        table = torch.zeros(max_len, 1, d_model)
        table[:, 0, 0::2] = torch.sin(pos * freq)
        table[:, 0, 1::2] = torch.cos(pos * freq)
        self.register_buffer("table", table)

    def forward(self, x):
        return self.dropout(x + self.table[: x.size(0)])


class TransformerModel(nn.Module):
    def __init__(self, ntoken, d_model, nhead, d_hid, nlayers, dropout=0.5):
        super().__init__()
        self.pos_encoder = PositionalEncoding(d_model, dropout)
        self.transformer_encoder = TransformerEncoder(TransformerEncoderLayer(d_model, nhead, d_hid, dropout), nlayers)
        self.embedding = nn.Embedding(ntoken, d_model)
        self.d_model = d_model
        self.linear = nn.Linear(d_model, ntoken)
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)
        nn.init.uniform_(self.linear.weight, -0.1, 0.1)
        nn.init.zeros_(self.linear.bias)

    def forward(self, src: Tensor, src_mask: Tensor = None) -> Tensor:
        h = self.pos_encoder(self.embedding(src) * math.sqrt(self.d_model))
        return self.linear(self.transformer_encoder(h, src_mask))


def batchify(data, bsz):
    n = data.size(0) // bsz
    return data[: n * bsz].view(bsz, n).t().contiguous()


bptt = 35


def get_batch(source, i):
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].reshape(-1)


torch.manual_seed(0)
train_data = batchify(token_stream(20 * 35 * 50 + 1, seed=0), 20)
val_data = batchify(token_stream(10 * 35 * 6 + 1, seed=1), 10)
model = TransformerModel(VOCAB, 64, 2, 64, 2, dropout=0.2)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=5.0)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.95)


def train(model):
    model.train()
    total_loss = 0.0
    for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
        data, targets = get_batch(train_data, i)
        output = model(data)
        loss = criterion(output.view(-1, VOCAB), targets)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        total_loss += loss.item()
        if batch % 10 == 0 and batch > 0:
            print(f"| epoch {epoch:3d} | batch {batch:3d} | lr {scheduler.get_last_lr()[0]:.2f} "
                  f"| loss {total_loss / 10:5.2f} | ppl {math.exp(total_loss / 10):7.2f}")
            total_loss = 0.0


def evaluate(model, eval_data):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for i in range(0, eval_data.size(0) - 1, bptt):
            data, targets = get_batch(eval_data, i)
            total += data.size(0) * criterion(model(data).view(-1, VOCAB), targets).item()
    return total / (len(eval_data) - 1)


for epoch in range(1, 4):
    train(model)
    val_loss = evaluate(model, val_data)
    print(f"| end of epoch {epoch:3d} | valid loss {val_loss:5.2f} | valid ppl {math.exp(val_loss):7.2f}")
    scheduler.step()

# Predict the token that follows each prefix from the prefix alone.
model.eval()
hits, n = 0, 0
with torch.no_grad():
    for t in range(4, 34):
        data, _ = get_batch(val_data, 0)
        pred = model(data[:t])[-1].argmax(-1)
        hits += int((pred == data[t]).sum())
        n += data.size(1)
print(f"next-token accuracy from prefixes: {hits / n:.2f}")
