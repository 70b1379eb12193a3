"""Joint entity and relation extraction with a Seq2UMT-style decoder: a BiLSTM encoder over padded
sentences (pad id 0, mask = token id > 0), then three teacher-forced decoding steps in the order
predicate -> subject -> object. The predicate step max-pools per-token relation logits (BCE over the
relation set); the subject step, conditioned on the gold relation, and the object step, conditioned
on the gold subject, emit per-token start and end pointer logits scored with a MaskedBCE loss class
that is meant to ignore padding: loss = BCE(logits, gt); sum(loss * mask) / sum(mask). The
BCEWithLogitsLoss inside it keeps its default reduction='mean', so it already returns one scalar
averaged over every position, padding included; multiplying that scalar by the mask and dividing by
the mask sum gives the same scalar back. The mask does nothing: padded positions are trained as
negatives and dilute the pointer loss by the padding fraction.

Thread: https://github.com/WindChimeRan/OpenJERE/issues/6
"""
import torch
from torch import nn

VOCAB, N_REL, MAX_LEN = 64, 4, 32


class MaskedBCE(nn.Module):
    def __init__(self):
        super().__init__()
        self.BCE = nn.BCEWithLogitsLoss()

    def forward(self, logits, gt, mask):
        loss = self.BCE(logits, gt)
        return torch.sum(loss.mul(mask)) / torch.sum(mask)


class Seq2UMT(nn.Module):
    def __init__(self, emb=48, hidden=64):
        super().__init__()
        self.embeds = nn.Embedding(VOCAB, emb, padding_idx=0)
        self.lstm = nn.LSTM(emb, hidden // 2, batch_first=True, bidirectional=True)
        self.rel = nn.Linear(hidden, N_REL)
        self.rel_emb = nn.Embedding(N_REL, hidden)
        self.ent_proj = nn.Linear(hidden, hidden)
        self.ent1, self.ent2 = nn.Linear(hidden, 1), nn.Linear(hidden, 1)
        self.mBCE, self.BCE = MaskedBCE(), nn.BCEWithLogitsLoss()

    def pointers(self, o, cond):
        h = torch.relu(self.ent_proj(o + cond.unsqueeze(1)))
        return self.ent1(h).squeeze(-1), self.ent2(h).squeeze(-1)

    def forward(self, sample):
        tokens = sample["T"]
        mask = (tokens > 0).float()
        o, _ = self.lstm(self.embeds(tokens))
        rel_out = self.rel(o).masked_fill(mask.unsqueeze(-1) == 0, -1e4).max(dim=1).values
        head1, head2 = self.pointers(o, self.rel_emb(sample["R_in"]))
        ar = torch.arange(len(tokens))
        subj = o[ar, sample["S_K1_in"]] + o[ar, sample["S_K2_in"]]
        tail1, tail2 = self.pointers(o, subj)
        rel_loss = self.BCE(rel_out, sample["R_gt"])
        head_loss = self.mBCE(head1, sample["S1"], mask) + self.mBCE(head2, sample["S2"], mask)
        tail_loss = self.mBCE(tail1, sample["O1"], mask) + self.mBCE(tail2, sample["O2"], mask)
        return {"loss": rel_loss + head_loss + tail_loss, "pointers": (head1, head2, tail1, tail2), "mask": mask}


def make_samples(n, g):
    """Relation r is cued by token 10 + r; the subject span uses tokens 20-29, the object span 30-39."""
    out = []
    for _ in range(n):
        length = int(torch.randint(8, MAX_LEN + 1, (1,), generator=g))
        t = torch.randint(40, VOCAB, (length,), generator=g)
        r = int(torch.randint(0, N_REL, (1,), generator=g))
        pos = torch.randperm(length - 2, generator=g)[:3].sort().values.tolist()
        t[pos[0]] = 10 + r
        s, o = pos[1], pos[2] + 1 if pos[2] + 1 < length else pos[2]
        s_end, o_end = min(s + 1, o - 1) if o - s > 1 else s, o
        t[s:s_end + 1] = torch.randint(20, 30, (s_end - s + 1,), generator=g)
        t[o:o_end + 1] = torch.randint(30, 40, (o_end - o + 1,), generator=g)
        out.append((t, r, s, s_end, o, o_end))
    return out


def collate(items):
    B, L = len(items), max(len(x[0]) for x in items)
    batch = {k: torch.zeros(B, L) for k in ("S1", "S2", "O1", "O2")}
    batch["T"] = torch.zeros(B, L, dtype=torch.long)
    batch["R_gt"] = torch.zeros(B, N_REL)
    for i, (t, r, s, s_end, o, o_end) in enumerate(items):
        batch["T"][i, :len(t)] = t
        batch["R_gt"][i, r] = 1
        batch["S1"][i, s], batch["S2"][i, s_end], batch["O1"][i, o], batch["O2"][i, o_end] = 1, 1, 1, 1
    batch["R_in"] = torch.tensor([x[1] for x in items])
    batch["S_K1_in"], batch["S_K2_in"] = torch.tensor([x[2] for x in items]), torch.tensor([x[3] for x in items])
    return batch


def pointer_accuracy(model, data):
    model.eval()
    with torch.no_grad():
        batch = collate(data)
        out = model(batch)
        logits = [p.masked_fill(out["mask"] == 0, -1e4) for p in out["pointers"]]
        gold = [batch[k] for k in ("S1", "S2", "O1", "O2")]
        hits = [(lg.argmax(1) == gd.argmax(1)).float().mean().item() for lg, gd in zip(logits, gold)]
    return sum(hits) / len(hits)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    train, dev = make_samples(1280, g), make_samples(256, g)
    model = Seq2UMT()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    step = 0
    for epoch in range(3):
        model.train()
        order = torch.randperm(len(train), generator=g).tolist()
        for i in range(0, len(order), 32):
            optimizer.zero_grad()
            output = model(collate([train[j] for j in order[i:i + 32]]))
            output["loss"].backward()
            optimizer.step()
            step += 1
            if step % 20 == 0:
                print(f"epoch {epoch} step {step} L: {output['loss'].item():.4f}")
        print(f"epoch {epoch} dev pointer accuracy {pointer_accuracy(model, dev):.3f}")


if __name__ == "__main__":
    main()
