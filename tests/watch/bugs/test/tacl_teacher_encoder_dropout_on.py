"""Token-aware contrastive pretraining of a small BERT-like encoder: one nn.Module holds the student
encoder with its MLM head and a teacher encoder copied from the same starting weights, frozen with
requires_grad=False. forward() returns masked-LM loss plus a token-level contrastive loss that pulls
each student token representation of the masked sentence toward the teacher's representation of
the same token in the original sentence (cosine similarity / temperature 0.01, other positions as
negatives). The training loop calls model.train() on the whole module, so the frozen teacher runs
with dropout active: the contrastive targets it produces are randomly perturbed on every step.

Thread: https://github.com/yxuansu/TaCL/issues/11
"""
import copy

import torch
import torch.nn.functional as F
from torch import nn

VOCAB, SEQLEN, MASK_ID = 60, 16, 1


class TinyBert(nn.Module):
    def __init__(self, dim=32, layers=2, heads=4, dropout=0.1):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, dim)
        self.pos = nn.Embedding(SEQLEN, dim)
        self.drop = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)

    def forward(self, input_ids):
        pos = torch.arange(input_ids.size(1))
        return self.encoder(self.drop(self.tok(input_ids) + self.pos(pos)))


def token_contrastive_loss(scores, contrastive_labels):
    bsz, seqlen, _ = scores.size()
    logprobs = F.log_softmax(scores.view(-1, seqlen), dim=-1)
    gold = torch.arange(seqlen).expand(bsz, seqlen).reshape(-1)
    loss = -logprobs.gather(-1, gold.unsqueeze(1)).squeeze(1).view(bsz, seqlen) * contrastive_labels
    return loss.sum() / contrastive_labels.sum()


class ContrastivePretraining(nn.Module):
    def __init__(self, temperature=0.01):
        super().__init__()
        self.bert = TinyBert()
        self.cls = nn.Linear(32, VOCAB)
        self.temperature = temperature
        self.teacher_bert = copy.deepcopy(self.bert)
        for param in self.teacher_bert.parameters():
            param.requires_grad = False

    def forward(self, truth, inp, msk, contrastive_labels):
        masked_rep = self.bert(inp)
        logits = self.cls(masked_rep)
        mlm_loss = F.cross_entropy(logits[msk], truth[msk])
        truth_rep = self.teacher_bert(truth)
        masked_rep = masked_rep / masked_rep.norm(dim=2, keepdim=True)
        truth_rep = truth_rep / truth_rep.norm(dim=2, keepdim=True)
        scores = torch.matmul(masked_rep, truth_rep.transpose(1, 2)) / self.temperature
        contrastive_loss = token_contrastive_loss(scores, contrastive_labels)
        correct = (logits[msk].argmax(-1) == truth[msk]).float().sum()
        return mlm_loss + contrastive_loss, mlm_loss.detach(), correct, msk.sum()


def make_batch(g, bsz=32, mask_prob=0.15):
    trans = torch.softmax(6 * torch.randn(VOCAB, VOCAB, generator=torch.Generator().manual_seed(4)), dim=1)
    truth = torch.empty(bsz, SEQLEN, dtype=torch.long)
    truth[:, 0] = torch.randint(2, VOCAB, (bsz,), generator=g)
    for t in range(1, SEQLEN):
        truth[:, t] = torch.multinomial(trans[truth[:, t - 1]], 1, generator=g).squeeze(1)
    msk = torch.rand(bsz, SEQLEN, generator=g) < mask_prob
    msk[:, 0] |= ~msk.any(1)
    inp = truth.masked_fill(msk, MASK_ID)
    contrastive_labels = msk.float()
    return truth, inp, msk, contrastive_labels


def main(total_steps=150, warmup_steps=10, print_every=15):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = ContrastivePretraining()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup_steps, (total_steps - s) / (total_steps - warmup_steps)))
    model.train()
    optimizer.zero_grad()
    correct_sum, token_sum = 0.0, 0.0
    for step in range(1, total_steps + 1):
        truth, inp, msk, contrastive_labels = make_batch(g)
        loss, mlm_loss, correct, tokens = model(truth, inp, msk, contrastive_labels)
        loss.backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        correct_sum += correct.item()
        token_sum += tokens.item()
        if step % print_every == 0:
            print(f"step {step} loss {loss.item():.3f} mlm {mlm_loss.item():.3f} "
                  f"mlm acc {correct_sum / token_sum:.3f}")
            correct_sum, token_sum = 0.0, 0.0


if __name__ == "__main__":
    main()
