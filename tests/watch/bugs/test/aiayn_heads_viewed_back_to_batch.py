"""An early from-scratch "Attention Is All You Need" implementation: a MultiHeadAttention holding
per-head projection tensors w_qs/w_ks/w_vs of shape (n_head, d_model, d_k) that treats the heads as
extra batch entries (q.repeat(n_head, 1, 1).view(n_head, -1, d_model), bmm, view to
(n_head*mb_size, len, d_k)), padding and subsequent masks repeated n_head times, a ScheduledOptim
wrapper (step, zero_grad, update_learning_rate with the inverse-sqrt warmup), a criterion with
zero weight on PAD and summed loss, and train(model, training_data, validation_data, crit,
optimizer, opt) calling train_epoch and eval_epoch each epoch on a toy translation task.
After attention the output is (n_head*mb_size, len_q, d_v), head-major, and is turned back with
outputs.view(mb_size, len_q, -1): no reordering, so each sentence's "concatenated heads" are
built from the attention outputs of other sentences in the batch (and other positions of them,
future target positions included).

Thread: https://github.com/jadore801120/attention-is-all-you-need-pytorch/issues/7
"""
import math
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn

PAD, BOS, EOS = 0, 1, 2
VOCAB = 20


def position_encoding_init(n_position, d_pos_vec):
    enc = np.array([[pos / np.power(10000, 2 * (i // 2) / d_pos_vec) for i in range(d_pos_vec)]
                    if pos != 0 else np.zeros(d_pos_vec) for pos in range(n_position)])
    enc[1:, 0::2] = np.sin(enc[1:, 0::2])
    enc[1:, 1::2] = np.cos(enc[1:, 1::2])
    return torch.from_numpy(enc).float()


def get_attn_padding_mask(seq_q, seq_k):
    return seq_k.eq(PAD).unsqueeze(1).expand(seq_q.size(0), seq_q.size(1), seq_k.size(1))


def get_attn_subsequent_mask(seq):
    return torch.triu(torch.ones(seq.size(0), seq.size(1), seq.size(1), dtype=torch.bool), diagonal=1)


class ScaledDotProductAttention(nn.Module):
    def __init__(self, d_k, attn_dropout=0.1):
        super().__init__()
        self.temper = math.sqrt(d_k)
        self.dropout = nn.Dropout(attn_dropout)

    def forward(self, q, k, v, attn_mask):
        attn = torch.bmm(q, k.transpose(1, 2)) / self.temper
        attn = attn.masked_fill(attn_mask, -1e9)
        attn = self.dropout(torch.softmax(attn, dim=-1))
        return torch.bmm(attn, v), attn


class MultiHeadAttention(nn.Module):
    def __init__(self, n_head, d_model, d_k, d_v, dropout=0.1):
        super().__init__()
        self.n_head, self.d_k, self.d_v = n_head, d_k, d_v
        self.w_qs = nn.Parameter(torch.empty(n_head, d_model, d_k))
        self.w_ks = nn.Parameter(torch.empty(n_head, d_model, d_k))
        self.w_vs = nn.Parameter(torch.empty(n_head, d_model, d_v))
        for w in (self.w_qs, self.w_ks, self.w_vs):
            nn.init.xavier_normal_(w)
        self.attention = ScaledDotProductAttention(d_k)
        self.layer_norm = nn.LayerNorm(d_model)
        self.proj = nn.Linear(n_head * d_v, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, q, k, v, attn_mask):
        n_head, d_k, d_v = self.n_head, self.d_k, self.d_v
        residual = q
        mb_size, len_q, d_model = q.size()
        len_k, len_v = k.size(1), v.size(1)
        # the heads become extra batch entries: n_head x (mb_size*len) x d_model
        q_s = q.repeat(n_head, 1, 1).view(n_head, -1, d_model)
        k_s = k.repeat(n_head, 1, 1).view(n_head, -1, d_model)
        v_s = v.repeat(n_head, 1, 1).view(n_head, -1, d_model)
        q_s = torch.bmm(q_s, self.w_qs).view(-1, len_q, d_k)
        k_s = torch.bmm(k_s, self.w_ks).view(-1, len_k, d_k)
        v_s = torch.bmm(v_s, self.w_vs).view(-1, len_v, d_v)
        outputs, attns = self.attention(q_s, k_s, v_s, attn_mask.repeat(n_head, 1, 1))
        # back to a batch of mb_size: (n_head*mb_size) x len_q x d_v  ->  mb_size x len_q x (n_head*d_v)
        outputs = outputs.view(mb_size, len_q, -1)
        outputs = self.dropout(self.proj(outputs))
        return self.layer_norm(outputs + residual), attns


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_hid, d_inner_hid, dropout=0.1):
        super().__init__()
        self.w_1 = nn.Conv1d(d_hid, d_inner_hid, 1)
        self.w_2 = nn.Conv1d(d_inner_hid, d_hid, 1)
        self.layer_norm = nn.LayerNorm(d_hid)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        out = self.w_2(torch.relu(self.w_1(x.transpose(1, 2)))).transpose(2, 1)
        return self.layer_norm(self.dropout(out) + x)


class EncoderLayer(nn.Module):
    def __init__(self, d_model, d_inner_hid, n_head, d_k, d_v, dropout=0.1):
        super().__init__()
        self.slf_attn = MultiHeadAttention(n_head, d_model, d_k, d_v, dropout)
        self.pos_ffn = PositionwiseFeedForward(d_model, d_inner_hid, dropout)

    def forward(self, enc_input, slf_attn_mask):
        out, attn = self.slf_attn(enc_input, enc_input, enc_input, slf_attn_mask)
        return self.pos_ffn(out), attn


class DecoderLayer(nn.Module):
    def __init__(self, d_model, d_inner_hid, n_head, d_k, d_v, dropout=0.1):
        super().__init__()
        self.slf_attn = MultiHeadAttention(n_head, d_model, d_k, d_v, dropout)
        self.enc_attn = MultiHeadAttention(n_head, d_model, d_k, d_v, dropout)
        self.pos_ffn = PositionwiseFeedForward(d_model, d_inner_hid, dropout)

    def forward(self, dec_input, enc_output, slf_attn_mask, dec_enc_attn_mask):
        out, _ = self.slf_attn(dec_input, dec_input, dec_input, slf_attn_mask)
        out, _ = self.enc_attn(out, enc_output, enc_output, dec_enc_attn_mask)
        return self.pos_ffn(out)


class Transformer(nn.Module):
    def __init__(self, n_vocab, n_max_seq, n_layers=1, n_head=4, d_model=32, d_inner_hid=64, dropout=0.1):
        super().__init__()
        d_k = d_v = d_model // n_head
        self.position_enc = nn.Embedding(n_max_seq + 1, d_model, padding_idx=PAD)
        self.position_enc.weight.data = position_encoding_init(n_max_seq + 1, d_model)
        self.word_emb = nn.Embedding(n_vocab, d_model, padding_idx=PAD)
        self.enc_stack = nn.ModuleList([EncoderLayer(d_model, d_inner_hid, n_head, d_k, d_v, dropout)
                                        for _ in range(n_layers)])
        self.dec_stack = nn.ModuleList([DecoderLayer(d_model, d_inner_hid, n_head, d_k, d_v, dropout)
                                        for _ in range(n_layers)])
        self.tgt_word_proj = nn.Linear(d_model, n_vocab, bias=False)
        nn.init.xavier_normal_(self.tgt_word_proj.weight)

    def get_trainable_parameters(self):
        frozen = {id(p) for p in self.position_enc.parameters()}
        return (p for p in self.parameters() if id(p) not in frozen)

    def decode(self, src_seq, enc_output, tgt_seq, tgt_pos):
        dec = self.word_emb(tgt_seq) + self.position_enc(tgt_pos)
        slf_mask = get_attn_padding_mask(tgt_seq, tgt_seq) | get_attn_subsequent_mask(tgt_seq)
        enc_mask = get_attn_padding_mask(tgt_seq, src_seq)
        for layer in self.dec_stack:
            dec = layer(dec, enc_output, slf_mask, enc_mask)
        return self.tgt_word_proj(dec)

    def encode(self, src_seq, src_pos):
        enc = self.word_emb(src_seq) + self.position_enc(src_pos)
        mask = get_attn_padding_mask(src_seq, src_seq)
        for layer in self.enc_stack:
            enc, _ = layer(enc, mask)
        return enc

    def forward(self, src, tgt):
        (src_seq, src_pos), (tgt_seq, tgt_pos) = src, tgt
        logits = self.decode(src_seq, self.encode(src_seq, src_pos), tgt_seq[:, :-1], tgt_pos[:, :-1])
        return logits.view(-1, logits.size(2))


class ScheduledOptim:
    def __init__(self, optimizer, d_model, n_warmup_steps):
        self.optimizer, self.d_model, self.n_warmup_steps = optimizer, d_model, n_warmup_steps
        self.n_current_steps = 0

    def step(self):
        self.optimizer.step()

    def zero_grad(self):
        self.optimizer.zero_grad()

    def update_learning_rate(self):
        self.n_current_steps += 1
        lr = self.d_model ** -0.5 * min(self.n_current_steps ** -0.5,
                                        self.n_current_steps * self.n_warmup_steps ** -1.5)
        for group in self.optimizer.param_groups:
            group["lr"] = lr


def make_batches(n_sent, batch_size, max_len, seed):
    """Toy translation: each source token maps to a fixed target token; lengths vary, so batches
    are padded."""
    g = torch.Generator().manual_seed(seed)
    table = torch.randperm(VOCAB - 3, generator=torch.Generator().manual_seed(5)) + 3
    batches = []
    for _ in range(n_sent // batch_size):
        lens = torch.randint(4, max_len - 1, (batch_size,), generator=g)
        L = int(lens.max()) + 2
        src = torch.full((batch_size, L), PAD)
        tgt = torch.full((batch_size, L), PAD)
        for i, n in enumerate(lens.tolist()):
            toks = torch.randint(3, VOCAB, (n,), generator=g)
            src[i, :n] = toks
            tgt[i, :n + 2] = torch.cat([torch.tensor([BOS]), table[toks - 3], torch.tensor([EOS])])
        pos = lambda s: torch.where(s != PAD, torch.arange(1, L + 1).expand_as(s), torch.zeros_like(s))
        batches.append(((src, pos(src)), (tgt, pos(tgt))))
    return batches


def get_performance(crit, pred, gold):
    gold = gold.contiguous().view(-1)
    loss = crit(pred, gold)
    n_correct = pred.max(1)[1].eq(gold).masked_select(gold.ne(PAD)).sum()
    return loss, n_correct


def train_epoch(model, training_data, crit, optimizer):
    model.train()
    total_loss, n_total_words, n_total_correct = 0.0, 0, 0
    for src, tgt in training_data:
        gold = tgt[0][:, 1:]
        optimizer.zero_grad()
        pred = model(src, tgt)
        loss, n_correct = get_performance(crit, pred, gold)
        loss.backward()
        optimizer.step()
        optimizer.update_learning_rate()
        n_words = int(gold.ne(PAD).sum())
        n_total_words += n_words
        n_total_correct += int(n_correct)
        total_loss += loss.item()
    return total_loss / n_total_words, n_total_correct / n_total_words


def eval_epoch(model, validation_data, crit):
    model.eval()
    total_loss, n_total_words, n_total_correct = 0.0, 0, 0
    with torch.no_grad():
        for src, tgt in validation_data:
            gold = tgt[0][:, 1:]
            loss, n_correct = get_performance(crit, model(src, tgt), gold)
            n_total_words += int(gold.ne(PAD).sum())
            n_total_correct += int(n_correct)
            total_loss += loss.item()
    return total_loss / n_total_words, n_total_correct / n_total_words


def train(model, training_data, validation_data, crit, optimizer, opt):
    for epoch_i in range(opt.epoch):
        train_loss, train_accu = train_epoch(model, training_data, crit, optimizer)
        valid_loss, valid_accu = eval_epoch(model, validation_data, crit)
        print(f"[ Epoch {epoch_i} ] train ppl {math.exp(min(train_loss, 100)):8.3f} accu {100 * train_accu:6.2f}% "
              f"| valid ppl {math.exp(min(valid_loss, 100)):8.3f} accu {100 * valid_accu:6.2f}%")


def main():
    torch.manual_seed(0)
    opt = SimpleNamespace(epoch=6, batch_size=32, max_len=14, d_model=32, n_warmup_steps=400)
    training_data = make_batches(800, opt.batch_size, opt.max_len, seed=1)
    validation_data = make_batches(160, opt.batch_size, opt.max_len, seed=2)
    transformer = Transformer(VOCAB, opt.max_len + 2, d_model=opt.d_model)
    optimizer = ScheduledOptim(
        torch.optim.Adam(transformer.get_trainable_parameters(), betas=(0.9, 0.98), eps=1e-09),
        opt.d_model, opt.n_warmup_steps)
    weight = torch.ones(VOCAB)
    weight[PAD] = 0
    crit = nn.CrossEntropyLoss(weight, reduction="sum")
    train(transformer, training_data, validation_data, crit, optimizer, opt)

    # Greedy translation of one validation batch, as a translate script would do it.
    transformer.eval()
    (src_seq, src_pos), (tgt_seq, _) = validation_data[0]
    with torch.no_grad():
        enc = transformer.encode(src_seq, src_pos)
        out = torch.full((src_seq.size(0), 1), BOS)
        for _ in range(tgt_seq.size(1) - 1):
            pos = torch.arange(1, out.size(1) + 1).expand_as(out)
            out = torch.cat([out, transformer.decode(src_seq, enc, out, pos)[:, -1:].argmax(-1)], dim=1)
    keep = tgt_seq[:, 1:] != PAD
    print(f"greedy token accuracy: {(out[:, 1:] == tgt_seq[:, 1:])[keep].float().mean().item():.3f}")


if __name__ == "__main__":
    main()
