"""A joint-embedding code search model (DeepCS style): a JointEmbeder with a method-name encoder
and an API-sequence encoder (SeqEncoder: embedding, dropout, packed bidirectional LSTM, last hidden
state), a bag-of-words token encoder (BOWEncoder: max-pooled embeddings), per-part Linear layers
fused through tanh into a code vector, and a SeqEncoder + Linear for the natural-language
description. forward(name, name_len, apiseq, api_len, tokens, tok_len, desc_good, good_len,
desc_bad, bad_len) returns the margin ranking loss on cosine similarities. A train() loop runs
AdamW over decay / no-decay groups with a cosine warmup schedule, clip_grad_norm_, step,
scheduler.step, model.zero_grad, and a validate() that ranks each description against a pool of
code vectors and reports MRR. SeqEncoder takes h_n of the last layer as [n_dirs, batch, hidden] and
flattens it with h_n.view(batch_size, -1) without first moving the batch axis to the front (the
transpose is commented out), so each row of the "encoding" is the forward and backward states of
two different samples glued together: every name, API and description vector depends on its batch
neighbours, training fits this scrambled pairing, and a query embedded alone retrieves the wrong
code. Nothing raises.

Thread: https://github.com/guxd/deep-code-search/issues/59
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
TOPICS, WORDS_PER_TOPIC = 60, 8
N_WORDS = 2 + 2 * TOPICS * WORDS_PER_TOPIC  # 0 = pad, code words, then description words
NAME_LEN, API_LEN, TOK_LEN, DESC_LEN = 6, 10, 16, 10


def config_JointEmbeder():
    return {"batch_size": 32, "nb_epoch": 5, "learning_rate": 1e-3, "adam_epsilon": 1e-8, "warmup_steps": 30,
            "n_words": N_WORDS, "emb_size": 64, "n_hidden": 64, "lstm_dims": 48, "margin": 0.4,
            "sim_measure": "cos"}


class CodeSearchDataset(Dataset):
    """Each method has a topic; its name, API calls, body tokens and docstring use that topic's words."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.topic = torch.randint(0, TOPICS, (n,), generator=g)
        self.items = [self._sample(t.item(), g) for t in self.topic]
        self.neg = torch.randint(0, n, (n,), generator=g)

    @staticmethod
    def _seq(topic, max_len, offset, g, noise=0.25):
        length = int(torch.randint(max_len // 2, max_len + 1, (1,), generator=g))
        words = 1 + offset + topic * WORDS_PER_TOPIC + torch.randint(0, WORDS_PER_TOPIC, (length,), generator=g)
        junk = torch.randint(1, N_WORDS, (length,), generator=g)
        words = torch.where(torch.rand(length, generator=g) < noise, junk, words)
        return F.pad(words, (0, max_len - length)), length

    def _sample(self, t, g):
        code_off, desc_off = 0, TOPICS * WORDS_PER_TOPIC
        return (self._seq(t, NAME_LEN, code_off, g), self._seq(t, API_LEN, code_off, g),
                self._seq(t, TOK_LEN, code_off, g), self._seq(t, DESC_LEN, desc_off, g))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        (name, nl), (api, al), (tok, tl), (desc, dl) = self.items[i]
        bad, bl = self.items[int(self.neg[i])][3]
        return name, nl, api, al, tok, tl, desc, dl, bad, bl


class BOWEncoder(nn.Module):
    def __init__(self, vocab_size, emb_size, hidden_size):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_size)
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)

    def forward(self, input, input_len=None):
        embedded = F.dropout(self.embedding(input), 0.25, self.training)
        return embedded.max(dim=1).values


class SeqEncoder(nn.Module):
    def __init__(self, vocab_size, emb_size, hidden_size, n_layers=1):
        super().__init__()
        self.hidden_size, self.n_layers = hidden_size, n_layers
        self.embedding = nn.Embedding(vocab_size, emb_size, padding_idx=0)
        self.lstm = nn.LSTM(emb_size, hidden_size, batch_first=True, bidirectional=True)
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)
        for name, param in self.lstm.named_parameters():
            param.data.uniform_(-0.1, 0.1)

    def forward(self, inputs, input_lens=None):
        batch_size, seq_len = inputs.size()
        inputs = F.dropout(self.embedding(inputs), 0.25, self.training)
        input_lens_sorted, indices = input_lens.sort(descending=True)
        packed = pack_padded_sequence(inputs.index_select(0, indices), input_lens_sorted.tolist(), batch_first=True)
        hids, (h_n, c_n) = self.lstm(packed)
        _, inv_indices = indices.sort()
        h_n = h_n.index_select(1, inv_indices)
        h_n = h_n.view(self.n_layers, 2, batch_size, self.hidden_size)  # [n_layers x n_dirs x batch x hid]
        h_n = h_n[-1]  # last layer: [n_dirs x batch x hid]
        # h_n = h_n.transpose(1, 0).contiguous()  # [batch x n_dirs x hid]
        encoding = h_n.view(batch_size, -1)  # [batch x (n_dirs * hid)]
        return encoding


class JointEmbeder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.conf, self.margin = config, config["margin"]
        self.name_encoder = SeqEncoder(config["n_words"], config["emb_size"], config["lstm_dims"])
        self.api_encoder = SeqEncoder(config["n_words"], config["emb_size"], config["lstm_dims"])
        self.tok_encoder = BOWEncoder(config["n_words"], config["emb_size"], config["n_hidden"])
        self.desc_encoder = SeqEncoder(config["n_words"], config["emb_size"], config["lstm_dims"])
        self.w_name = nn.Linear(2 * config["lstm_dims"], config["n_hidden"])
        self.w_api = nn.Linear(2 * config["lstm_dims"], config["n_hidden"])
        self.w_tok = nn.Linear(config["emb_size"], config["n_hidden"])
        self.w_desc = nn.Linear(2 * config["lstm_dims"], config["n_hidden"])
        self.fuse3 = nn.Linear(config["n_hidden"], config["n_hidden"])
        for m in [self.w_name, self.w_api, self.w_tok, self.fuse3]:
            m.weight.data.uniform_(-0.1, 0.1)
            nn.init.constant_(m.bias, 0.0)

    def code_encoding(self, name, name_len, api, api_len, tokens, tok_len):
        name_repr = self.name_encoder(name, name_len)
        api_repr = self.api_encoder(api, api_len)
        tok_repr = self.tok_encoder(tokens, tok_len)
        return self.fuse3(torch.tanh(self.w_name(name_repr) + self.w_api(api_repr) + self.w_tok(tok_repr)))

    def desc_encoding(self, desc, desc_len):
        return self.w_desc(self.desc_encoder(desc, desc_len))

    def forward(self, name, name_len, apiseq, api_len, tokens, tok_len, desc_anchor, desc_anchor_len, desc_neg,
                desc_neg_len):
        code_repr = self.code_encoding(name, name_len, apiseq, api_len, tokens, tok_len)
        anchor_sim = F.cosine_similarity(code_repr, self.desc_encoding(desc_anchor, desc_anchor_len))
        neg_sim = F.cosine_similarity(code_repr, self.desc_encoding(desc_neg, desc_neg_len))
        return (self.margin - anchor_sim + neg_sim).clamp(min=1e-6).mean()


def get_cosine_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, num_cycles=0.5):
    def lr_lambda(step):
        if step < num_warmup_steps:
            return float(step) / float(max(1, num_warmup_steps))
        progress = float(step - num_warmup_steps) / float(max(1, num_training_steps - num_warmup_steps))
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * float(num_cycles) * 2.0 * progress)))
    return LambdaLR(optimizer, lr_lambda)


def validate(valid_set, model, pool_size):
    model.eval()
    loader = DataLoader(valid_set, batch_size=pool_size, shuffle=False, drop_last=True)
    mrrs = []
    with torch.no_grad():
        for batch in loader:
            code_repr = F.normalize(model.code_encoding(*batch[:6]), dim=1).numpy()
            desc_repr = F.normalize(model.desc_encoding(*batch[6:8]), dim=1).numpy()
            for i in range(len(desc_repr)):
                sims = code_repr @ desc_repr[i]
                mrrs.append(1.0 / (1 + int((sims > sims[i]).sum())))
    return {"MRR": float(np.mean(mrrs))}


def train(config):
    train_set, valid_set = CodeSearchDataset(2400, seed=1), CodeSearchDataset(400, seed=2)
    data_loader = DataLoader(train_set, batch_size=config["batch_size"], shuffle=True, drop_last=True,
                             generator=torch.Generator().manual_seed(3))
    model = JointEmbeder(config)
    no_decay = ["bias", "LayerNorm.weight"]
    grouped = [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)], "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(grouped, lr=config["learning_rate"], eps=config["adam_epsilon"])
    scheduler = get_cosine_schedule_with_warmup(optimizer, config["warmup_steps"],
                                                len(data_loader) * config["nb_epoch"])
    itr_global = 1
    for epoch in range(1, config["nb_epoch"] + 1):
        losses = []
        for batch in data_loader:
            model.train()
            loss = model(*batch)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            optimizer.step()
            scheduler.step()
            model.zero_grad()
            losses.append(loss.item())
            if itr_global % 25 == 0:
                print("epo:[%d/%d] itr:%d Loss=%.5f" % (epoch, config["nb_epoch"], itr_global, np.mean(losses)))
                losses = []
            itr_global += 1
        print("validating..", validate(valid_set, model, 100))
    return model


if __name__ == "__main__":
    train(config_JointEmbeder())
