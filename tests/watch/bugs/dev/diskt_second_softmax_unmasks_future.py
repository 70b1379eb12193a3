"""An attention-based knowledge-tracing model in the style of a KT toolkit: question and
question-response embeddings with a cosine positional embedding, an Architecture of transformer
layers whose hand-written contradictory_attention(query, key, value1, value2, mask, dropout,
counter_attention_mask) masks future positions with masked_fill(-1e32), softmaxes, zeroes the
weights of flagged "guess / slip" interactions, and then applies a second softmax to renormalise.
The second softmax turns every masked 0 weight into exp(0) = 1, so each position again gives a small
but non-zero weight to the current and future interactions, whose values carry the responses: the
model partly reads the answers it must predict and the train and validation AUC are inflated.

Thread: https://github.com/zyy-2001/DisKT/issues/6
"""
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

N_Q, SEQ, DIM, HEADS = 50, 30, 32, 2


def auc_score(labels, scores):
    order = np.argsort(scores)
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    pos = labels == 1
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return (ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / max(n_pos * n_neg, 1)


def contradictory_attention(query, key, value1, value2, mask, dropout, counter_attention_mask):
    bs, head, seqlen, d_k = query.shape
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)
    scores = scores.masked_fill(mask == 0, -1e32)
    p_attn = F.softmax(scores, dim=-1)
    flagged = counter_attention_mask[:, None, None, :].expand_as(p_attn)
    p_attn = torch.where(flagged == 1, torch.zeros_like(p_attn), p_attn)
    p_attn = F.softmax(p_attn, dim=-1)
    p_attn = torch.cat([torch.zeros(bs, head, 1, seqlen), p_attn[:, :, 1:, :]], dim=2)
    p_attn = dropout(p_attn)
    return p_attn @ value1, p_attn @ value2


def create_mask(seqlen, k):
    return torch.from_numpy(np.triu(np.ones((1, 1, seqlen, seqlen)), k=k).astype("uint8")) == 0


class TransformerLayer(nn.Module):
    def __init__(self, dim, heads, dropout):
        super().__init__()
        self.heads, self.d_k = heads, dim // heads
        self.q_proj, self.v1_proj, self.v2_proj = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)
        self.drop = nn.Dropout(dropout)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.ffn = nn.Sequential(nn.Linear(dim, 2 * dim), nn.ReLU(), nn.Dropout(dropout), nn.Linear(2 * dim, dim))

    def split(self, x):
        return x.view(x.shape[0], -1, self.heads, self.d_k).transpose(1, 2)

    def forward(self, query, values, counter_mask):
        q = self.split(self.q_proj(query))
        v1, v2 = self.split(self.v1_proj(values)), self.split(self.v2_proj(values))
        o1, o2 = contradictory_attention(q, q, v1, v2, create_mask(query.shape[1], 0), self.drop, counter_mask)
        merged = (o1 + o2).transpose(1, 2).contiguous().view(query.shape[0], -1, self.heads * self.d_k)
        x = self.norm1(query + self.drop(self.out(merged)))
        return self.norm2(x + self.drop(self.ffn(x)))


class CosinePositionalEmbedding(nn.Module):
    def __init__(self, dim, max_len):
        super().__init__()
        pos = torch.arange(max_len).unsqueeze(1).float()
        div = torch.exp(torch.arange(0, dim, 2).float() * (-math.log(10000.0) / dim))
        pe = torch.zeros(max_len, dim)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
        self.register_buffer("pe", pe.unsqueeze(0))

    def forward(self, x):
        return self.pe[:, :x.shape[1]]


class DisKTLike(nn.Module):
    def __init__(self, dropout=0.1, num_blocks=2):
        super().__init__()
        self.q_embed = nn.Embedding(N_Q, DIM)
        self.qa_embed = nn.Embedding(2 * N_Q, DIM)
        self.position_emb = CosinePositionalEmbedding(DIM, SEQ)
        self.blocks = nn.ModuleList([TransformerLayer(DIM, HEADS, dropout) for _ in range(num_blocks)])
        self.out = nn.Sequential(nn.Linear(2 * DIM, DIM), nn.ReLU(), nn.Dropout(dropout), nn.Linear(DIM, 1))

    def forward(self, q, r, counter_mask):
        q_emb = self.q_embed(q)
        q_emb = q_emb + self.position_emb(q_emb)
        qa_emb = self.qa_embed(q + N_Q * r)
        qa_emb = qa_emb + self.position_emb(qa_emb)
        x = q_emb
        for block in self.blocks:
            x = block(x, qa_emb, counter_mask)
        return torch.sigmoid(self.out(torch.cat([x, q_emb], dim=-1)).squeeze(-1))


def make_students(n, g, skill_of, difficulty):
    ability = torch.randn(n, 5, generator=g)
    q = torch.randint(0, N_Q, (n, SEQ), generator=g)
    p = torch.sigmoid(1.5 * (ability.gather(1, skill_of[q]) - difficulty[q]))
    r = (torch.rand(n, SEQ, generator=g) < p).long()
    hard, easy = difficulty[q] > 0.8, difficulty[q] < -0.8
    counter = ((hard & (r == 1)) | (easy & (r == 0))).long()
    return q, r, counter


def run_epoch(model, data, g, optimizer=None, batch_size=32):
    q, r, counter = data
    order = torch.randperm(len(q), generator=g) if optimizer else torch.arange(len(q))
    preds, labels = [], []
    for s in range(0, len(q), batch_size):
        b = order[s:s + batch_size]
        with torch.set_grad_enabled(optimizer is not None):
            y = model(q[b], r[b], counter[b])
            loss = F.binary_cross_entropy(y[:, 1:], r[b][:, 1:].float())
        if optimizer is not None:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        preds.append(y[:, 1:].detach().reshape(-1))
        labels.append(r[b][:, 1:].reshape(-1))
    return auc_score(torch.cat(labels).numpy(), torch.cat(preds).numpy())


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    skill_of = torch.randint(0, 5, (N_Q,), generator=g)
    difficulty = torch.randn(N_Q, generator=g)
    train, valid = make_students(640, g, skill_of, difficulty), make_students(200, g, skill_of, difficulty)
    model = DisKTLike()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(4):
        model.train()
        train_auc = run_epoch(model, train, g, optimizer)
        model.eval()
        print(f"epoch {epoch} train auc {train_auc:.4f} valid auc {run_epoch(model, valid, g):.4f}")


if __name__ == "__main__":
    main()
