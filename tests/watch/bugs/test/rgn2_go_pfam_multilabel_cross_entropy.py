"""An RGN2-style protein language model trained with an auxiliary annotation objective: a small
encoder over amino-acid tokens has a masked-token head and two protein-level heads, one scoring GO
terms and one scoring Pfam families. A LossWrapper adds the masked-LM loss (an AminoBERT-like loss
module) to a GoPFAMLoss module that scores both annotation heads, and a plain loop runs
zero_grad/backward/step with Adam.

Bug: GO and Pfam annotations are multi-label (a protein carries several terms and several domains,
stored as multi-hot float vectors), but GoPFAMLoss builds nn.CrossEntropyLoss for both heads. With a
float (N, C) target CrossEntropyLoss silently takes the class-probability form, so every protein's
terms share one softmax: a protein with three GO terms can at best give each about 1/3, the loss
parks above its floor and no term of a multi-term protein ever passes a 0.5 threshold.

Thread: https://github.com/hypnopump/rgn2-replica/pull/12
"""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, MASK_ID, L, N_GO, N_PFAM = 24, 23, 40, 10, 6


class ProteinEncoder(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.conv = nn.Sequential(nn.Conv1d(dim, dim, 5, padding=2), nn.GELU(), nn.Conv1d(dim, dim, 5, padding=2), nn.GELU())
        self.lm_head = nn.Linear(dim, VOCAB)
        self.go_head = nn.Linear(dim, N_GO)
        self.pfam_head = nn.Linear(dim, N_PFAM)

    def forward(self, tokens):
        h = self.conv(self.embed(tokens).transpose(1, 2)).transpose(1, 2)
        pooled = h.max(dim=1).values
        return self.lm_head(h), self.go_head(pooled), self.pfam_head(pooled)


class AminoBERTLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.masked_loss = nn.CrossEntropyLoss(ignore_index=-100)

    def forward(self, logit_out, target):
        return self.masked_loss(logit_out.reshape(-1, VOCAB), target.reshape(-1))


class GoPFAMLoss(nn.Module):
    def __init__(self, weights=(1.0, 1.0)):
        super().__init__()
        self.weights = weights
        self.go_loss = nn.CrossEntropyLoss()  # multi-hot GO targets
        self.pfam_loss = nn.CrossEntropyLoss()  # multi-hot Pfam targets

    def forward(self, logit_go, logit_pfam, target_go, target_pfam):
        return self.weights[0] * self.go_loss(logit_go, target_go) + self.weights[1] * self.pfam_loss(logit_pfam, target_pfam)


class LossWrapper(nn.Module):
    def __init__(self, lm_loss, aux_loss, weights=(1.0, 1.0)):
        super().__init__()
        self.lm_loss, self.aux_loss, self.weights = lm_loss, aux_loss, weights

    def forward(self, logit_out, logit_go, logit_pfam, target, target_go, target_pfam):
        return self.weights[0] * self.lm_loss(logit_out, target) + self.weights[1] * self.aux_loss(
            logit_go, logit_pfam, target_go, target_pfam)


def make_batch(g, n=32):
    tokens = torch.randint(1, 21, (n, L), generator=g)
    # residue groups decide the annotations: several GO terms and domains per protein
    counts = F.one_hot(tokens, VOCAB)[:, :, 1:21].sum(1).float()
    go = (counts[:, :N_GO] + counts[:, N_GO:2 * N_GO] >= 4).float()
    pfam = (counts[:, :N_PFAM] * 2 - counts[:, N_PFAM:2 * N_PFAM] >= 2).float()
    mask = torch.rand(n, L, generator=g) < 0.15
    target = torch.where(mask, tokens, torch.full_like(tokens, -100))
    return tokens.masked_fill(mask, MASK_ID), target, go, pfam


def f1_at_half(probs, target):
    pred = (probs > 0.5).float()
    tp = (pred * target).sum()
    return (2 * tp / (pred.sum() + target.sum()).clamp_min(1)).item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = ProteinEncoder()
    criterion = LossWrapper(AminoBERTLoss(), GoPFAMLoss())
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    for step in range(150):
        tokens, target, go, pfam = make_batch(g)
        optimizer.zero_grad()
        logit_out, logit_go, logit_pfam = model(tokens)
        loss = criterion(logit_out, logit_go, logit_pfam, target, go, pfam)
        loss.backward()
        optimizer.step()
        if step % 25 == 0:
            print(f"step {step} loss {loss.item():.3f}")
    model.eval()
    with torch.no_grad():
        tokens, target, go, pfam = make_batch(torch.Generator().manual_seed(1), n=256)
        _, logit_go, logit_pfam = model(tokens)
        print(f"GO terms per protein {go.sum(1).mean().item():.2f}, Pfam domains per protein {pfam.sum(1).mean().item():.2f}")
        print(f"GO F1@0.5 {f1_at_half(logit_go.softmax(1), go):.3f}  Pfam F1@0.5 {f1_at_half(logit_pfam.softmax(1), pfam):.3f}")


if __name__ == "__main__":
    main()
