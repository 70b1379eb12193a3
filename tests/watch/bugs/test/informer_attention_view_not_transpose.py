"""A long-sequence forecaster in the Informer layout: an AttentionLayer projects queries, keys and
values to (B, L, H, D) and hands them to an inner attention whose forward() "moves the heads
forward" with queries.view(B, H, L_Q, -1) (and the same for keys and values) instead of
transpose(2, 1). The view keeps the memory order and only re-cuts it, so each "head" receives a
scrambled mixture of time steps and channels; no shape check fails. An Exp_Informer-like class
trains it with train() and reports vali() loss.

Thread: https://github.com/zhouhaoyi/Informer2020/issues/59
"""
import math

import torch
from torch import nn


class FullAttention(nn.Module):
    def __init__(self, scale=None, attention_dropout=0.0):
        super().__init__()
        self.scale = scale
        self.dropout = nn.Dropout(attention_dropout)

    def forward(self, queries, keys, values):
        B, L_Q, H, D = queries.shape
        _, L_K, _, _ = keys.shape
        queries = queries.view(B, H, L_Q, -1)
        keys = keys.view(B, H, L_K, -1)
        values = values.view(B, H, L_K, -1)
        scale = self.scale or 1.0 / math.sqrt(D)
        scores = torch.matmul(queries, keys.transpose(-2, -1)) * scale
        attn = self.dropout(torch.softmax(scores, dim=-1))
        context = torch.matmul(attn, values)           # (B, H, L_Q, D)
        return context.transpose(2, 1).contiguous()    # (B, L_Q, H, D)


class AttentionLayer(nn.Module):
    def __init__(self, attention, d_model, n_heads):
        super().__init__()
        d_keys = d_model // n_heads
        self.inner_attention = attention
        self.query_projection = nn.Linear(d_model, d_keys * n_heads)
        self.key_projection = nn.Linear(d_model, d_keys * n_heads)
        self.value_projection = nn.Linear(d_model, d_keys * n_heads)
        self.out_projection = nn.Linear(d_keys * n_heads, d_model)
        self.n_heads = n_heads

    def forward(self, queries, keys, values):
        B, L, _ = queries.shape
        _, S, _ = keys.shape
        H = self.n_heads
        queries = self.query_projection(queries).view(B, L, H, -1)
        keys = self.key_projection(keys).view(B, S, H, -1)
        values = self.value_projection(values).view(B, S, H, -1)
        out = self.inner_attention(queries, keys, values).view(B, L, -1)
        return self.out_projection(out)


class EncoderLayer(nn.Module):
    def __init__(self, attention, d_model, d_ff):
        super().__init__()
        self.attention = attention
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)

    def forward(self, x):
        x = self.norm1(x + self.attention(x, x, x))
        return self.norm2(x + self.ff(x))


class Forecaster(nn.Module):
    def __init__(self, enc_in, seq_len, pred_len, d_model=32, n_heads=4, e_layers=2):
        super().__init__()
        self.embedding = nn.Linear(enc_in, d_model)
        self.position = nn.Parameter(torch.randn(seq_len, d_model) * 0.02)
        self.layers = nn.ModuleList([EncoderLayer(AttentionLayer(FullAttention(), d_model, n_heads), d_model, 64)
                                     for _ in range(e_layers)])
        self.projection = nn.Linear(d_model * seq_len, pred_len * enc_in)
        self.pred_len, self.enc_in = pred_len, enc_in

    def forward(self, x_enc):
        h = self.embedding(x_enc) + self.position
        for layer in self.layers:
            h = layer(h)
        return self.projection(h.flatten(1)).view(-1, self.pred_len, self.enc_in)


def seasonal_series(n_windows, seq_len, pred_len, enc_in, seed):
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(seq_len + pred_len).float()
    phase = torch.rand(n_windows, 1, enc_in, generator=g) * 6.28
    period = torch.tensor([8.0, 12.0, 24.0])[:enc_in]
    series = torch.sin(2 * math.pi * t[None, :, None] / period + phase) \
        + 0.1 * torch.randn(n_windows, seq_len + pred_len, enc_in, generator=g)
    return series[:, :seq_len], series[:, seq_len:]


class Exp_Informer:
    def __init__(self, args):
        self.args = args
        self.model = Forecaster(args["enc_in"], args["seq_len"], args["pred_len"])
        self.criterion = nn.MSELoss()

    def vali(self, vali_data):
        self.model.eval()
        with torch.no_grad():
            x, y = vali_data
            return self.criterion(self.model(x), y).item()

    def train(self, train_data, vali_data):
        model_optim = torch.optim.Adam(self.model.parameters(), lr=self.args["learning_rate"])
        x_all, y_all = train_data
        bs = self.args["batch_size"]
        for epoch in range(self.args["train_epochs"]):
            self.model.train()
            perm = torch.randperm(len(x_all), generator=torch.Generator().manual_seed(epoch))
            losses = []
            for i in range(0, len(x_all), bs):
                idx = perm[i:i + bs]
                model_optim.zero_grad()
                loss = self.criterion(self.model(x_all[idx]), y_all[idx])
                loss.backward()
                model_optim.step()
                losses.append(loss.item())
            print(f"Epoch: {epoch + 1} | Train Loss: {sum(losses) / len(losses):.5f} "
                  f"Vali Loss: {self.vali(vali_data):.5f}")


def main():
    torch.manual_seed(0)
    args = {"enc_in": 3, "seq_len": 48, "pred_len": 12, "batch_size": 32, "learning_rate": 1e-3, "train_epochs": 4}
    train_data = seasonal_series(640, args["seq_len"], args["pred_len"], args["enc_in"], seed=0)
    vali_data = seasonal_series(160, args["seq_len"], args["pred_len"], args["enc_in"], seed=1)
    Exp_Informer(args).train(train_data, vali_data)


if __name__ == "__main__":
    main()
