"""A singing-voice annotation model in the STARS style: a mel encoder (Conv1d + bidirectional GRU) with
a phone-boundary head and a frame-level phone head. A task class has run_model(sample) that fills a
dict of losses through helpers (add_ph_bd_loss: BCE-with-logits on boundaries; add_phone_ce_loss:
frame cross-entropy; add_phone_ctc_loss: CTC over the phone sequence), and a training_step that sums
the dict, then zero_grad / backward / step. The CTC input is built by concatenating the blank column
with the phone columns of the frame logits; add_phone_ctc_loss permutes them to (T, B, C) and passes
the raw logits to F.ctc_loss, which expects log-probabilities (no log_softmax).

Thread: https://github.com/gwx314/STARS/issues/9
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

N_MELS, N_PH = 24, 10          # phone ids 1..N_PH-1; column 0 = blank, column 1 = silence/other


class AnnotationModel(nn.Module):
    def __init__(self, hidden=48):
        super().__init__()
        self.conv = nn.Conv1d(N_MELS, hidden, 5, padding=2)
        self.rnn = nn.GRU(hidden, hidden, batch_first=True, bidirectional=True)
        self.ph_bd_head = nn.Linear(2 * hidden, 1)
        self.ph_frame_head = nn.Linear(2 * hidden, N_PH + 1)

    def forward(self, mel):
        h = torch.relu(self.conv(mel.transpose(1, 2))).transpose(1, 2)
        h = self.rnn(h)[0]
        return {"ph_bd_logits": self.ph_bd_head(h).squeeze(-1), "ph_frame_logits": self.ph_frame_head(h)}


class StarsTask:
    def __init__(self, model, lr=2e-3):
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
        self.global_step = 0

    def add_ph_bd_loss(self, ph_bd_logits, ph_bd, losses):
        losses["ph_bd"] = F.binary_cross_entropy_with_logits(ph_bd_logits, ph_bd)

    def add_phone_ce_loss(self, ph_logits, ph_frame, losses):
        losses["ph_ce_loss"] = F.cross_entropy(ph_logits.transpose(1, 2), ph_frame)

    def add_phone_ctc_loss(self, ph_frame_logits, ph, input_lengths, target_lengths, losses):
        ph_frame_logits = ph_frame_logits.permute(1, 0, 2)          # (T, B, C)
        losses["ph_ctc_loss"] = F.ctc_loss(ph_frame_logits, ph, input_lengths, target_lengths)

    def run_model(self, sample):
        output = self.model(sample["mels"])
        losses = {}
        self.add_ph_bd_loss(output["ph_bd_logits"], sample["ph_bd"], losses)
        logits = output["ph_frame_logits"]
        ctc_logits = torch.cat([logits[:, :, [0]], logits[:, :, 2:]], dim=-1)
        self.add_phone_ctc_loss(ctc_logits, sample["ph"], sample["mel_lengths"], sample["ph_lengths"], losses)
        self.add_phone_ce_loss(logits[:, :, 1:], sample["ph_frame"], losses)
        return losses, output

    def training_step(self, sample):
        self.model.train()
        losses, _ = self.run_model(sample)
        total_loss = sum(losses.values())
        self.optimizer.zero_grad()
        total_loss.backward()
        self.optimizer.step()
        self.global_step += 1
        return total_loss.item(), {k: v.item() for k, v in losses.items()}


def make_samples(n_batches, bs, seed):
    g = torch.Generator().manual_seed(seed)
    ph_mels = 1.5 * torch.randn(N_PH, N_MELS, generator=torch.Generator().manual_seed(7))
    samples = []
    for _ in range(n_batches):
        n_ph = 6
        ph = torch.randint(1, N_PH, (bs, n_ph), generator=g)
        durs = torch.randint(3, 7, (bs, n_ph), generator=g)
        T = int(durs.sum(1).max())
        mels = torch.full((bs, T, N_MELS), -1.0)
        ph_frame = torch.zeros(bs, T, dtype=torch.long)      # 0 = silence in the frame head
        ph_bd = torch.zeros(bs, T)
        for b in range(bs):
            frames = torch.repeat_interleave(ph[b], durs[b])
            L = frames.numel()
            mels[b, :L] = ph_mels[frames] + 0.5 * torch.randn(L, N_MELS, generator=g)
            ph_frame[b, :L] = frames
            ph_bd[b, torch.cumsum(durs[b], 0)[:-1]] = 1.0
        samples.append({"mels": mels, "ph": ph, "ph_frame": ph_frame, "ph_bd": ph_bd,
                        "mel_lengths": durs.sum(1),
                        "ph_lengths": torch.full((bs,), n_ph, dtype=torch.long)})
    return samples


def main():
    torch.manual_seed(0)
    task = StarsTask(AnnotationModel())
    samples = make_samples(25, 16, seed=0)
    for epoch in range(3):
        for sample in samples:
            total, parts = task.training_step(sample)
        print(f"epoch {epoch} total {total:.3f} " + " ".join(f"{k} {v:.3f}" for k, v in parts.items()))


if __name__ == "__main__":
    main()
