"""A SAINT+ knowledge-tracing model written as a Lightning-style module (training_step,
validation_step, epoch-end AUC) driven by a small fit() loop: an encoder attends over exercise,
category and position embeddings, a decoder attends over response embeddings plus an elapsed-time
projection, both with an upper-triangular (diagonal=1) attention mask, and BCEWithLogitsLoss
scores the answer at every position. The decoder is fed the answers of the same positions it has
to predict, unshifted: position t's own response is in its input (the mask only hides t+1 on), so
the model copies it and train and validation AUC go to about 1.0 while it learns nothing usable.

Thread: https://github.com/shivanandmn/SAINT_plus-Knowledge-Tracing-/pull/3
"""
import numpy as np
import torch
from torch import nn

SEQ, N_EXE, N_CAT, DIM, HEADS = 40, 200, 10, 32, 2


def auc_score(labels, scores):
    order = np.argsort(scores)
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    pos = labels == 1
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return (ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / max(n_pos * n_neg, 1)


class AttentionStack(nn.Module):
    def __init__(self, n_blocks, n_attn, dim, heads, seq_len):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.blocks = nn.ModuleList([nn.ModuleList([nn.MultiheadAttention(dim, heads) for _ in range(n_attn)])
                                     for _ in range(n_blocks)])
        self.ffns = nn.ModuleList([nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))
                                   for _ in range(n_blocks)])
        self.register_buffer("mask", torch.triu(torch.ones(seq_len, seq_len), diagonal=1).bool())

    def forward(self, q, k, v, memory=None, cross_at=None):
        for attns, ffn in zip(self.blocks, self.ffns):
            for i, attn in enumerate(attns):
                out, _ = attn(self.norm(q).transpose(0, 1), self.norm(k).transpose(0, 1),
                              self.norm(v).transpose(0, 1), attn_mask=self.mask)
                out = out.transpose(0, 1)
                q = q + out
                if memory is not None and i + 1 == cross_at:
                    k = v = memory
                else:
                    k, v = k + out, v + out
            q = q + ffn(self.norm(q))
            k = v = q
        return q


class SaintPlusModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.loss = nn.BCEWithLogitsLoss()
        self.exe_emb, self.cat_emb = nn.Embedding(N_EXE, DIM), nn.Embedding(N_CAT, DIM)
        self.enc_pos, self.dec_pos = nn.Embedding(SEQ, DIM), nn.Embedding(SEQ, DIM)
        self.resp_emb = nn.Embedding(3, DIM)
        self.elapsed = nn.Linear(1, DIM)
        self.encoder = AttentionStack(1, 1, DIM, HEADS, SEQ)
        self.decoder = AttentionStack(1, 2, DIM, HEADS, SEQ)
        self.fc = nn.Linear(DIM, 1)

    def forward(self, x, responses):
        pos = torch.arange(SEQ)
        enc = self.exe_emb(x["input_ids"]) + self.cat_emb(x["input_cat"]) + self.enc_pos(pos)
        dec = self.resp_emb(responses) + self.dec_pos(pos) + self.elapsed(x["input_rtime"].unsqueeze(-1))
        memory = self.encoder(enc, enc, enc)
        out = self.decoder(dec, dec, dec, memory=memory, cross_at=1)
        return self.fc(out).squeeze(-1)

    def training_step(self, batch):
        x, labels = batch
        out = self(x, labels)
        loss = self.loss(out, labels.float())
        return {"loss": loss, "outs": torch.sigmoid(out).detach(), "labels": labels}

    def validation_step(self, batch):
        x, labels = batch
        out = self(x, labels)
        return {"val_loss": self.loss(out, labels.float()), "outs": torch.sigmoid(out), "labels": labels}

    def epoch_end(self, outputs, tag):
        scores = torch.cat([o["outs"].reshape(-1) for o in outputs]).numpy()
        labels = torch.cat([o["labels"].reshape(-1) for o in outputs]).numpy()
        print(f"{tag} auc {auc_score(labels, scores):.4f}")

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


class MiniTrainer:
    def __init__(self, max_epochs):
        self.max_epochs = max_epochs

    def fit(self, module, train_batches, val_batches):
        optimizer = module.configure_optimizers()
        for epoch in range(self.max_epochs):
            module.train()
            outs = []
            for batch in train_batches():
                result = module.training_step(batch)
                optimizer.zero_grad()
                result["loss"].backward()
                optimizer.step()
                outs.append(result)
            module.epoch_end(outs, f"epoch {epoch} train")
            module.eval()
            with torch.no_grad():
                module.epoch_end([module.validation_step(b) for b in val_batches()], f"epoch {epoch} val")


def make_students(n, g, difficulty, exe_cat):
    ability = torch.randn(n, 1, generator=g)
    exe = torch.randint(0, N_EXE, (n, SEQ), generator=g)
    practice = torch.arange(SEQ).float() / SEQ
    p = torch.sigmoid(1.5 * (ability + 0.8 * practice - difficulty[exe]))
    answers = (torch.rand(n, SEQ, generator=g) < p).long()
    rtime = torch.rand(n, SEQ, generator=g)
    prior_rtime = torch.cat([torch.zeros(n, 1), rtime[:, :-1]], dim=1)
    return {"input_ids": exe, "input_cat": exe_cat[exe], "input_rtime": prior_rtime}, answers


def loader(data, batch_size, g, shuffle):
    x, y = data

    def batches():
        idx = torch.randperm(len(y), generator=g) if shuffle else torch.arange(len(y))
        for s in range(0, len(y), batch_size):
            b = idx[s:s + batch_size]
            yield {k: v[b] for k, v in x.items()}, y[b]
    return batches


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    difficulty = torch.randn(N_EXE, generator=g)
    exe_cat = torch.randint(0, N_CAT, (N_EXE,), generator=g)
    train = make_students(1024, g, difficulty, exe_cat)
    val = make_students(256, g, difficulty, exe_cat)
    MiniTrainer(max_epochs=3).fit(SaintPlusModule(), loader(train, 32, g, True), loader(val, 64, g, False))


if __name__ == "__main__":
    main()
