"""A non-attentive TTS model in the ForwardTacotron style: character embedding, a duration predictor
(conv + bidirectional GRU), a length regulator that repeats each character by its duration, an LSTM
and a linear layer to mel frames, plus a small postnet. The model returns mels as
(batch, n_mels, frames); batches are padded to the longest utterance with the log-mel floor
(-11.5). A ForwardTrainer class with train_session(model, optimizer, session) computes a MaskedL1
loss on both mel outputs plus an L1 duration loss, then zero_grad / backward / clip / step. MaskedL1
builds its length mask with max_len = target.size(1), which is n_mels and not the number of frames;
since every utterance is longer than n_mels frames the mask is all ones, so the padded frames are
scored (and counted in the denominator) as if they were speech.

Thread: https://github.com/axelspringer/ForwardTacotron/issues/21
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

N_MELS, N_CHARS, PAD_VALUE = 20, 12, -11.5


def pad_mask(lens, max_len):
    steps = torch.arange(max_len).unsqueeze(0).expand(lens.size(0), max_len)
    return (steps < lens.unsqueeze(1)).float()


class MaskedL1(nn.Module):
    def forward(self, x, target, lens):
        max_len = target.size(1)                       # size of the mel axis, not the time axis
        mask = pad_mask(lens, max_len).unsqueeze(2).expand_as(x)
        return F.l1_loss(x * mask, target * mask, reduction="sum") / mask.sum()


class DurationPredictor(nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.conv = nn.Conv1d(dims, dims, 3, padding=1)
        self.rnn = nn.GRU(dims, 16, batch_first=True, bidirectional=True)
        self.lin = nn.Linear(32, 1)

    def forward(self, x):
        x = torch.relu(self.conv(x.transpose(1, 2))).transpose(1, 2)
        return self.lin(self.rnn(x)[0]).squeeze(-1)


class ForwardTacotron(nn.Module):
    def __init__(self, embed_dims=32, rnn_dims=48):
        super().__init__()
        self.embedding = nn.Embedding(N_CHARS, embed_dims)
        self.dur_pred = DurationPredictor(embed_dims)
        self.lstm = nn.LSTM(embed_dims, rnn_dims, batch_first=True, bidirectional=True)
        self.lin = nn.Linear(2 * rnn_dims, N_MELS)
        self.postnet = nn.Conv1d(N_MELS, N_MELS, 5, padding=2)

    @staticmethod
    def regulate(x, dur):
        rows = [torch.repeat_interleave(x[b], dur[b], dim=0) for b in range(x.size(0))]
        return nn.utils.rnn.pad_sequence(rows, batch_first=True)

    def forward(self, chars, mel, dur):
        x = self.embedding(chars)
        dur_hat = self.dur_pred(x)
        x = self.regulate(x, dur)
        x = self.lin(self.lstm(x)[0]).transpose(1, 2)      # (B, n_mels, T)
        x_post = x + self.postnet(x)
        T = mel.size(2)
        x = F.pad(x[:, :, :T], [0, T - min(T, x.size(2))])
        x_post = F.pad(x_post[:, :, :T], [0, T - min(T, x_post.size(2))])
        return x, x_post, dur_hat


def make_batches(n_batches, bs, seed):
    g = torch.Generator().manual_seed(seed)
    char_mels = torch.randn(N_CHARS, N_MELS, generator=torch.Generator().manual_seed(3)) * 2 - 5
    batches = []
    for _ in range(n_batches):
        n_chars = torch.randint(8, 16, (bs,), generator=g)
        chars = torch.zeros(bs, int(n_chars.max()), dtype=torch.long)
        dur = torch.zeros(bs, int(n_chars.max()), dtype=torch.long)
        mels = []
        for b in range(bs):
            c = torch.randint(1, N_CHARS, (int(n_chars[b]),), generator=g)
            d = torch.randint(3, 7, (int(n_chars[b]),), generator=g)
            chars[b, :len(c)], dur[b, :len(d)] = c, d
            frames = torch.repeat_interleave(char_mels[c], d, dim=0)
            mels.append(frames + 0.3 * torch.randn(frames.shape, generator=g))
        lens = torch.tensor([m.size(0) for m in mels])
        mel = nn.utils.rnn.pad_sequence(mels, batch_first=True, padding_value=PAD_VALUE).transpose(1, 2)
        batches.append((chars, mel, lens, dur))
    return batches


class ForwardTrainer:
    def __init__(self):
        self.l1_loss = MaskedL1()

    def train_session(self, model, optimizer, session):
        for epoch in range(session["epochs"]):
            for i, (x, m, lens, dur) in enumerate(session["train_set"], 1):
                model.train()
                m1_hat, m2_hat, dur_hat = model(x, m, dur)
                m1_loss = self.l1_loss(m1_hat, m, lens)
                m2_loss = self.l1_loss(m2_hat, m, lens)
                dur_loss = F.l1_loss(dur_hat, dur.float())
                loss = m1_loss + m2_loss + dur_loss
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
            print(f"epoch {epoch} mel loss {m1_loss.item() + m2_loss.item():.4f} dur loss {dur_loss.item():.4f}")


def main():
    torch.manual_seed(0)
    model = ForwardTacotron()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    session = {"epochs": 4, "train_set": make_batches(20, 8, seed=0)}
    ForwardTrainer().train_session(model, optimizer, session)


if __name__ == "__main__":
    main()
