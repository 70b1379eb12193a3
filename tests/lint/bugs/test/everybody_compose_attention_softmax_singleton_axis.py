"""
Shape: models module with an RNN encoder (linear + bidirectional LSTM), an additive Attention module built from
two Linear layers and an nn.Softmax module stored on self, a decoder that calls the attention once per step and
feeds the context into an LSTM, and a top-level model whose loss_function builds nn.CrossEntropyLoss on flattened
outputs and whose clip_gradients_ helper clips by value; a separate train(model_name, ...) function picks the
model from a toml config through get_model, runs it through a model_forward dispatcher, Adam, per-epoch train and
no_grad validation loops.
Bug: the attention scores have shape (batch, seq_len, 1) and the nn.Softmax module normalises over dim=2, the
singleton axis, so every attention weight is 1 and the context is the plain sum of encoder states instead of a
weighted average over the sequence axis (dim=1).
Thread: https://github.com/tsunrise/everybody-compose/pull/53
"""
import toml
import torch
import torch.nn as nn
import torch.utils.data
from torch.nn import functional as F

from preprocess.dataset import BeatsRhythmsDataset

CFG_FILE = "./config.toml"


class BeatEncoder(nn.Module):
    def __init__(self, hid):
        super().__init__()
        self.proj = nn.Linear(2, hid)
        self.rnn = nn.LSTM(hid, hid, batch_first=True, bidirectional=True)

    def forward(self, beats):
        return self.rnn(self.proj(beats))


class AdditiveAttention(nn.Module):
    def __init__(self, enc_hid, dec_hid):
        super().__init__()
        self.score_in = nn.Linear(enc_hid * 2 + dec_hid, enc_hid)
        self.score_act = nn.LeakyReLU()
        self.score_out = nn.Linear(enc_hid, 1)
        self.normalise = nn.Softmax(dim=2)

    def forward(self, enc_out, dec_h):
        n, steps, _ = enc_out.shape
        query = dec_h.permute(1, 0, 2).repeat(1, steps, 1)
        energy = self.score_act(self.score_in(torch.concat((query, enc_out), dim=-1)))
        weights = self.normalise(self.score_out(energy))
        weights = weights.view(n, 1, steps)
        return torch.bmm(weights, enc_out)


class NoteDecoder(nn.Module):
    def __init__(self, n_notes, emb, enc_hid, dec_hid, p_drop=0.1):
        super().__init__()
        self.dec_hid = dec_hid
        self.attend = AdditiveAttention(enc_hid, dec_hid)
        self.embed = nn.Embedding(n_notes, emb)
        self.merge = nn.Linear(enc_hid * 2 + emb, dec_hid)
        self.drop = nn.Dropout(p_drop)
        self.rnn = nn.LSTM(dec_hid, dec_hid, batch_first=True)
        self.head = nn.Linear(dec_hid, n_notes)

    def forward(self, prev_note, enc_out, state=None):
        if state is None:
            dev = next(self.parameters()).device
            zeros = torch.zeros(1, prev_note.shape[0], self.dec_hid, device=dev)
            state = (zeros, zeros.clone())
        ctx = self.attend(enc_out, state[0])
        h = torch.cat((self.embed(prev_note), ctx), dim=2)
        h = self.drop(F.relu(self.merge(h)))
        h, state = self.rnn(h, state)
        return self.head(h), state


class AttentionComposer(nn.Module):
    def __init__(self, n_notes, emb, enc_hid, dec_hid, p_drop=0.1):
        super().__init__()
        self.n_notes = n_notes
        self.encoder = BeatEncoder(enc_hid)
        self.decoder = NoteDecoder(n_notes, emb, enc_hid, dec_hid, p_drop)

    def forward(self, beats, prev_notes):
        n, steps, _ = beats.shape
        logits = torch.zeros(n, steps, self.n_notes, device=beats.device)
        enc_out, _ = self.encoder(beats)
        state = None
        for t in range(steps):
            step_out, state = self.decoder(prev_notes[:, t:t + 1], enc_out, state)
            logits[:, t:t + 1, :] = step_out
        return logits

    def loss_function(self, logits, notes):
        ce = nn.CrossEntropyLoss()
        return ce(logits.reshape(-1, logits.shape[-1]), notes.flatten())

    def clip_gradients_(self, limit):
        torch.nn.utils.clip_grad.clip_grad_value_(self.parameters(), limit)


def get_model(name, cfg, device):
    if name == "attention_rnn":
        return AttentionComposer(cfg["n_notes"], cfg["embed_dim"], cfg["encode_hidden_dim"],
                                 cfg["decode_hidden_dim"]).to(device)
    raise ValueError(name)


def model_forward(name, model, beats, prev_notes):
    return model(beats, prev_notes)


def train(model_name, n_epochs, device):
    cfg = toml.load(CFG_FILE)
    mcfg = cfg["model"][model_name]
    model = get_model(model_name, mcfg, device)
    data = BeatsRhythmsDataset(mcfg["seq_len"], cfg["global"]["random_slice_seed"])
    data.load(cfg["global"]["dataset"])
    tr_set, va_set = data.train_val_split(cfg["global"]["train_val_split_seed"], cfg["global"]["val_ratio"])
    tr_loader = torch.utils.data.DataLoader(tr_set, batch_size=mcfg["batch_size"], shuffle=True)
    va_loader = torch.utils.data.DataLoader(va_set, batch_size=mcfg["batch_size"], shuffle=False)
    opt = torch.optim.Adam(model.parameters(), lr=mcfg["lr"])
    for epoch in range(n_epochs):
        model.train()
        for batch in tr_loader:
            opt.zero_grad()
            beats = batch["beats"].to(device)
            notes = batch["notes"].long().to(device)
            prev = batch["notes_shifted"].long().to(device)
            out = model_forward(model_name, model, beats, prev)
            loss = model.loss_function(out, notes)
            loss.backward()
            if "clip_grad" in mcfg:
                model.clip_gradients_(mcfg["clip_grad"])
            opt.step()
        model.eval()
        with torch.no_grad():
            for batch in va_loader:
                out = model_forward(model_name, model, batch["beats"].to(device),
                                    batch["notes_shifted"].long().to(device))
                model.loss_function(out, batch["notes"].long().to(device))
    return model
