"""
Shape: Hand-written time-series transformer split over helper classes: per-head attention blocks collected in a list that is then wrapped in nn.ModuleList inside a multi-head block, EncoderLayer/DecoderLayer modules built from it, and a top-level Transformer whose __init__ appends n encoder and n decoder layers to lists in for loops; forward runs the first layer of each stack then loops over the rest. A notebook-style script at module level sets hyperparameters, builds the Transformer and Adam over its parameters(), and trains with a manual MSE on synthetic batches from a get_data helper.
Bug: The encoder and decoder stacks are plain Python lists on the Transformer, so none of those layers are registered: Adam built from parameters() only sees the input/output Linear layers and the encoder/decoder weights never train.
Thread: https://github.com/LiamMaclean216/Pytorch-Transfomer/pull/7
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from utils import PositionalEncoding, get_data, scaled_attention


class HeadBlock(nn.Module):
    def __init__(self, width, attn_width):
        super().__init__()
        self.q = nn.Linear(width, attn_width, bias=False)
        self.k = nn.Linear(width, attn_width, bias=False)
        self.v = nn.Linear(width, width, bias=False)

    def forward(self, x, memory=None):
        src = x if memory is None else memory
        return scaled_attention(self.q(x), self.k(src), self.v(src))


class MultiHead(nn.Module):
    def __init__(self, width, attn_width, heads):
        super().__init__()
        blocks = []
        for _ in range(heads):
            blocks.append(HeadBlock(width, attn_width))
        self.blocks = nn.ModuleList(blocks)
        self.merge = nn.Linear(heads * width, width, bias=False)

    def forward(self, x, memory=None):
        outs = torch.stack([b(x, memory=memory) for b in self.blocks], dim=-1)
        return self.merge(outs.flatten(start_dim=2))


class EncoderLayer(nn.Module):
    def __init__(self, width, attn_width, heads=1):
        super().__init__()
        self.self_attn = MultiHead(width, attn_width, heads)
        self.lin_a = nn.Linear(width, width)
        self.lin_b = nn.Linear(width, width)
        self.ln_a = nn.LayerNorm(width)
        self.ln_b = nn.LayerNorm(width)

    def forward(self, x):
        x = self.ln_a(x + self.self_attn(x))
        return self.ln_b(x + self.lin_a(F.elu(self.lin_b(x))))


class DecoderLayer(nn.Module):
    def __init__(self, width, attn_width, heads=1):
        super().__init__()
        self.self_attn = MultiHead(width, attn_width, heads)
        self.cross_attn = MultiHead(width, attn_width, heads)
        self.lin_a = nn.Linear(width, width)
        self.lin_b = nn.Linear(width, width)
        self.ln_a = nn.LayerNorm(width)
        self.ln_b = nn.LayerNorm(width)
        self.ln_c = nn.LayerNorm(width)

    def forward(self, x, enc_out):
        x = self.ln_a(x + self.self_attn(x))
        x = self.ln_b(x + self.cross_attn(x, memory=enc_out))
        return self.ln_c(x + self.lin_a(F.elu(self.lin_b(x))))


class Transformer(nn.Module):
    def __init__(self, width, attn_width, in_size, dec_len, out_len, n_dec=1, n_enc=1, heads=1):
        super().__init__()
        self.dec_len = dec_len
        self.enc_stack = []
        for _ in range(n_enc):
            self.enc_stack.append(EncoderLayer(width, attn_width, heads))
        self.dec_stack = []
        for _ in range(n_dec):
            self.dec_stack.append(DecoderLayer(width, attn_width, heads))
        self.posenc = PositionalEncoding(width)
        self.enc_in = nn.Linear(in_size, width)
        self.dec_in = nn.Linear(in_size, width)
        self.head = nn.Linear(dec_len * width, out_len)

    def forward(self, x):
        h = self.enc_stack[0](self.posenc(self.enc_in(x)))
        for layer in self.enc_stack[1:]:
            h = layer(h)
        y = self.dec_stack[0](self.dec_in(x[:, -self.dec_len:]), h)
        for layer in self.dec_stack[1:]:
            y = layer(y, h)
        return self.head(y.flatten(start_dim=1))


enc_len, dec_len, horizon = 6, 2, 1
width, attn_width, heads = 10, 5, 3
n_enc = n_dec = 3
learning_rate, n_epochs, bsz = 0.002, 20, 15

net = Transformer(width, attn_width, 1, dec_len, horizon, n_dec, n_enc, heads)
adam = torch.optim.Adam(net.parameters(), lr=learning_rate)
history = []

for epoch in range(n_epochs):
    for step in range(-10 - enc_len, 10 - enc_len):
        adam.zero_grad()
        inputs, targets = get_data(bsz, enc_len, horizon)
        preds = net(inputs)
        mse = torch.mean((preds - targets) ** 2)
        mse.backward()
        adam.step()
        history.append(mse.item())
    print("epoch", epoch, "mse", history[-1])
