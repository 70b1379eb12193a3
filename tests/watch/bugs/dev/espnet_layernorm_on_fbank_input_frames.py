"""ESPnet1-style hybrid CTC/attention ASR, scaled down: globally CMVN-normalised 40-dim fbank
utterances go into an E2E model (VGG2L front-end halving time twice, BLSTM encoder, CTC branch,
dot-attention LSTM decoder) whose forward(xs_pad, ilens, ys_pad) returns
mtlalpha * loss_ctc + (1 - mtlalpha) * loss_att; an updater loop (Adam, grad clipping at 5) reports
loss/acc per epoch and an evaluator reports validation loss, acc and greedy-CTC CER.

The VGG2L front-end applies nn.LayerNorm(idim) to each input frame, which gives every frame the
same level (energy). The tokens here differ by energy, so CTC loss stays flat and validation CER
stays at 1.0, while the same model without that LayerNorm learns the task.

Thread: https://github.com/espnet/espnet/issues/1250
"""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence

IDIM = 40
N_TOK = 4                 # token ids 1..4, 0 is the CTC blank
ODIM = N_TOK + 2          # + sos/eos
SOS = EOS = ODIM - 1
IGNORE_ID = -1
SHAPE = torch.sin(torch.linspace(0, 3 * math.pi, IDIM))             # shared spectral envelope
LEVELS = torch.tensor([0.0, -2.0, -0.7, 0.7, 2.0])   # per-token log-energy offset (index 0 unused)


def make_corpus(n_utts, g):
    """Utterances of 3-5 tokens, each 8-11 frames; a token shows up as a shift of all bins."""
    feats, labels = [], []
    for _ in range(n_utts):
        n = int(torch.randint(3, 6, (1,), generator=g))
        toks = torch.randint(1, N_TOK + 1, (n,), generator=g)
        frames = []
        for t in toks:
            dur = int(torch.randint(8, 12, (1,), generator=g))
            frames.append(SHAPE + LEVELS[t] + 0.5 * torch.randn(dur, IDIM, generator=g))
        feats.append(torch.cat(frames))
        labels.append(toks)
    return feats, labels


def global_cmvn(feats, stats=None):
    if stats is None:
        cat = torch.cat(feats)
        stats = (cat.mean(0), cat.std(0))
    return [(f - stats[0]) / stats[1] for f in feats], stats


class VGG2L(nn.Module):
    def __init__(self, idim, in_channel=1, ch=(8, 16)):
        super().__init__()
        self.input_norm = nn.LayerNorm(idim)
        self.conv1_1 = nn.Conv2d(in_channel, ch[0], 3, padding=1)
        self.conv1_2 = nn.Conv2d(ch[0], ch[0], 3, padding=1)
        self.conv2_1 = nn.Conv2d(ch[0], ch[1], 3, padding=1)
        self.conv2_2 = nn.Conv2d(ch[1], ch[1], 3, padding=1)
        self.in_channel = in_channel
        self.odim = ch[1] * math.ceil(math.ceil(idim / 2) / 2)

    def forward(self, xs_pad, ilens):
        xs_pad = self.input_norm(xs_pad)
        b, t, d = xs_pad.shape
        xs = xs_pad.view(b, t, self.in_channel, d // self.in_channel).transpose(1, 2)
        xs = F.relu(self.conv1_2(F.relu(self.conv1_1(xs))))
        xs = F.max_pool2d(xs, 2, stride=2, ceil_mode=True)
        xs = F.relu(self.conv2_2(F.relu(self.conv2_1(xs))))
        xs = F.max_pool2d(xs, 2, stride=2, ceil_mode=True)
        ilens = torch.ceil(torch.ceil(ilens.float() / 2) / 2).long()
        xs = xs.transpose(1, 2)
        return xs.contiguous().view(b, xs.size(1), -1), ilens


class Encoder(nn.Module):
    def __init__(self, idim, eunits, eprojs):
        super().__init__()
        self.vgg = VGG2L(idim)
        self.blstm = nn.LSTM(self.vgg.odim, eunits, batch_first=True, bidirectional=True)
        self.proj = nn.Linear(2 * eunits, eprojs)

    def forward(self, xs_pad, ilens):
        xs, ilens = self.vgg(xs_pad, ilens)
        packed = pack_padded_sequence(xs, ilens.cpu(), batch_first=True, enforce_sorted=False)
        ys, _ = self.blstm(packed)
        ys, _ = pad_packed_sequence(ys, batch_first=True)
        return torch.tanh(self.proj(ys)), ilens


class CTC(nn.Module):
    def __init__(self, odim, eprojs):
        super().__init__()
        self.ctc_lo = nn.Linear(eprojs, odim)

    def forward(self, hs_pad, hlens, ys_pad):
        ys = [y[y != IGNORE_ID] for y in ys_pad]
        logp = self.ctc_lo(hs_pad).log_softmax(2).transpose(0, 1)
        olens = torch.tensor([len(y) for y in ys])
        return F.ctc_loss(logp, torch.cat(ys), hlens, olens, blank=0, reduction="sum",
                          zero_infinity=True) / len(ys)


def edit_distance(a, b):
    d = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        prev, d[0] = d[0], i
        for j in range(1, len(b) + 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (a[i - 1] != b[j - 1]))
    return d[-1]


def ctc_greedy_cer(model, xs_pad, ilens, ys_pad):
    """Character error rate of greedy CTC decoding, as the report_cer option computes it."""
    hs_pad, hlens = model.enc(xs_pad, ilens)
    best = model.ctc.ctc_lo(hs_pad).argmax(-1)
    errs = chars = 0
    for seq, n, y in zip(best, hlens, ys_pad):
        hyp = torch.unique_consecutive(seq[:n])
        hyp = hyp[hyp != 0].tolist()
        ref = y[y != IGNORE_ID].tolist()
        errs, chars = errs + edit_distance(hyp, ref), chars + len(ref)
    return errs, chars


class Decoder(nn.Module):
    def __init__(self, odim, eprojs, dunits):
        super().__init__()
        self.embed = nn.Embedding(odim, dunits)
        self.cell = nn.LSTMCell(dunits + eprojs, dunits)
        self.att_q = nn.Linear(dunits, eprojs)
        self.output = nn.Linear(dunits + eprojs, odim)
        self.dunits = dunits

    def forward(self, hs_pad, hlens, ys_pad):
        ys = [y[y != IGNORE_ID] for y in ys_pad]
        sos = ys[0].new_tensor([SOS])
        ys_in = pad_sequence([torch.cat([sos, y]) for y in ys], batch_first=True, padding_value=EOS)
        ys_out = pad_sequence([torch.cat([y, sos.new_tensor([EOS])]) for y in ys], batch_first=True,
                              padding_value=IGNORE_ID)
        b, tmax = hs_pad.size(0), hs_pad.size(1)
        mask = torch.arange(tmax)[None, :] >= hlens[:, None]
        z = c = hs_pad.new_zeros(b, self.dunits)
        ctx = hs_pad.new_zeros(b, hs_pad.size(2))
        emb = self.embed(ys_in)
        outs = []
        for i in range(ys_in.size(1)):
            z, c = self.cell(torch.cat([emb[:, i], ctx], dim=1), (z, c))
            e = torch.bmm(hs_pad, self.att_q(z).unsqueeze(2)).squeeze(2).masked_fill(mask, -1e9)
            ctx = torch.bmm(e.softmax(1).unsqueeze(1), hs_pad).squeeze(1)
            outs.append(self.output(torch.cat([z, ctx], dim=1)))
        logits = torch.stack(outs, dim=1)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), ys_out.view(-1), ignore_index=IGNORE_ID)
        valid = ys_out != IGNORE_ID
        acc = (logits.argmax(-1)[valid] == ys_out[valid]).float().mean().item()
        return loss, acc


class E2E(nn.Module):
    def __init__(self, idim, odim, eunits=64, eprojs=64, dunits=64, mtlalpha=0.5):
        super().__init__()
        self.enc = Encoder(idim, eunits, eprojs)
        self.ctc = CTC(odim, eprojs)
        self.dec = Decoder(odim, eprojs, dunits)
        self.mtlalpha = mtlalpha

    def forward(self, xs_pad, ilens, ys_pad):
        hs_pad, hlens = self.enc(xs_pad, ilens)
        loss_ctc = self.ctc(hs_pad, hlens, ys_pad)
        loss_att, acc = self.dec(hs_pad, hlens, ys_pad)
        alpha = self.mtlalpha
        self.loss = alpha * loss_ctc + (1 - alpha) * loss_att
        return self.loss, loss_ctc.item(), loss_att.item(), acc


def batches(feats, labels, batch_size, g=None):
    order = torch.randperm(len(feats), generator=g) if g is not None else torch.arange(len(feats))
    for s in range(0, len(feats), batch_size):
        idx = order[s:s + batch_size].tolist()
        xs = pad_sequence([feats[i] for i in idx], batch_first=True)
        ilens = torch.tensor([len(feats[i]) for i in idx])
        ys = pad_sequence([labels[i] for i in idx], batch_first=True, padding_value=IGNORE_ID)
        yield xs, ilens, ys


def main():
    g = torch.Generator().manual_seed(0)
    train_feats, train_labels = make_corpus(256, g)
    dev_feats, dev_labels = make_corpus(64, g)
    train_feats, stats = global_cmvn(train_feats)
    dev_feats, _ = global_cmvn(dev_feats, stats)

    torch.manual_seed(1)
    model = E2E(IDIM, ODIM)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    grad_clip = 5.0
    shuffle = torch.Generator().manual_seed(2)
    for epoch in range(1, 7):
        model.train()
        logs = []
        for xs, ilens, ys in batches(train_feats, train_labels, 16, shuffle):
            loss, l_ctc, l_att, acc = model(xs, ilens, ys)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            optimizer.step()
            logs.append((loss.item(), l_ctc, l_att, acc))
        model.eval()
        with torch.no_grad():
            val = [model(xs, ilens, ys) for xs, ilens, ys in batches(dev_feats, dev_labels, 32)]
            cer = [ctc_greedy_cer(model, xs, ilens, ys) for xs, ilens, ys in batches(dev_feats, dev_labels, 32)]
        val_cer = sum(e for e, _ in cer) / sum(c for _, c in cer)
        m = [sum(v) / len(v) for v in zip(*logs)]
        val_loss = sum(v[0].item() for v in val) / len(val)
        val_acc = sum(v[3] for v in val) / len(val)
        print(f"epoch {epoch}  main/loss {m[0]:.3f}  main/loss_ctc {m[1]:.3f}  main/loss_att {m[2]:.3f}  "
              f"main/acc {m[3]:.3f}  validation/main/loss {val_loss:.3f}  validation/main/acc {val_acc:.3f}  "
              f"validation/main/cer_ctc {val_cer:.3f}")


if __name__ == "__main__":
    main()
