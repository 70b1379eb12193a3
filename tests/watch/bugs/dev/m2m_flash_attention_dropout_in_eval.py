"""A tiny Hugging-Face-style encoder-decoder (M2M100/Bart layout written by hand): a config object, an
eager attention class and a "flash" attention subclass picked through config.attn_implementation,
encoder and decoder layers, and a seq2seq model returning a loss when labels are given. The task
is sequence reversal over a small vocabulary. A Seq2SeqTrainer-like class runs the usual loop
(model.train(), zero_grad, forward, loss.backward(), step) and an evaluate() method that calls
model.eval() and, under torch.no_grad(), reports eval loss and token accuracy every epoch.

Bug: the flash attention class forwards its configured attention dropout to the fused attention
kernel (F.scaled_dot_product_attention) unconditionally. A functional kernel cannot see the
module's training flag, so model.eval() does not switch that dropout off: every evaluation still
drops attention weights at random and the reported eval loss/accuracy are noisy and worse than
the model really is. The eager attention class passes training=self.training and is fine; only
the flash path, copied from Bart into many models, kept the dropout on in eval.

Thread: https://github.com/huggingface/transformers/pull/33844
"""
import torch
import torch.nn.functional as F
from torch import nn


class TinyM2MConfig:
    def __init__(self, **kw):
        self.vocab_size = 16
        self.d_model = 48
        self.heads = 4
        self.ffn_dim = 96
        self.layers = 2
        self.attention_dropout = 0.3
        self.dropout = 0.1
        self.max_len = 12
        self.pad_token_id = 0
        self.bos_token_id = 1
        self.attn_implementation = "flash_attention_2"
        self.__dict__.update(kw)


class TinyM2MAttention(nn.Module):
    def __init__(self, config, is_causal=False):
        super().__init__()
        self.heads = config.heads
        self.head_dim = config.d_model // config.heads
        self.dropout = config.attention_dropout
        self.is_causal = is_causal
        self.q_proj = nn.Linear(config.d_model, config.d_model)
        self.k_proj = nn.Linear(config.d_model, config.d_model)
        self.v_proj = nn.Linear(config.d_model, config.d_model)
        self.out_proj = nn.Linear(config.d_model, config.d_model)

    def _shape(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, hidden, key_value_states=None):
        kv = hidden if key_value_states is None else key_value_states
        q, k, v = self._shape(self.q_proj(hidden)), self._shape(self.k_proj(kv)), self._shape(self.v_proj(kv))
        scores = q @ k.transpose(-1, -2) / self.head_dim ** 0.5
        if self.is_causal:
            t = scores.shape[-1]
            mask = torch.ones(t, t, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(mask, float("-inf"))
        probs = F.dropout(scores.softmax(-1), p=self.dropout, training=self.training)
        out = (probs @ v).transpose(1, 2).reshape(hidden.shape)
        return self.out_proj(out)


class TinyM2MFlashAttention2(TinyM2MAttention):
    def forward(self, hidden, key_value_states=None):
        kv = hidden if key_value_states is None else key_value_states
        q, k, v = self._shape(self.q_proj(hidden)), self._shape(self.k_proj(kv)), self._shape(self.v_proj(kv))
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout, is_causal=self.is_causal)
        out = out.transpose(1, 2).reshape(hidden.shape)
        return self.out_proj(out)


ATTENTION_CLASSES = {"eager": TinyM2MAttention, "flash_attention_2": TinyM2MFlashAttention2}


class EncoderLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.self_attn = ATTENTION_CLASSES[config.attn_implementation](config)
        self.ln1 = nn.LayerNorm(config.d_model)
        self.ln2 = nn.LayerNorm(config.d_model)
        self.fc1 = nn.Linear(config.d_model, config.ffn_dim)
        self.fc2 = nn.Linear(config.ffn_dim, config.d_model)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, h):
        h = h + self.dropout(self.self_attn(self.ln1(h)))
        return h + self.dropout(self.fc2(F.gelu(self.fc1(self.ln2(h)))))


class DecoderLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        attn_cls = ATTENTION_CLASSES[config.attn_implementation]
        self.self_attn = attn_cls(config, is_causal=True)
        self.cross_attn = attn_cls(config)
        self.ln1 = nn.LayerNorm(config.d_model)
        self.ln2 = nn.LayerNorm(config.d_model)
        self.ln3 = nn.LayerNorm(config.d_model)
        self.fc1 = nn.Linear(config.d_model, config.ffn_dim)
        self.fc2 = nn.Linear(config.ffn_dim, config.d_model)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, h, enc):
        h = h + self.dropout(self.self_attn(self.ln1(h)))
        h = h + self.dropout(self.cross_attn(self.ln2(h), key_value_states=enc))
        return h + self.dropout(self.fc2(F.gelu(self.fc1(self.ln3(h)))))


class TinyM2MForConditionalGeneration(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.pos = nn.Embedding(config.max_len, config.d_model)
        self.encoder = nn.ModuleList(EncoderLayer(config) for _ in range(config.layers))
        self.decoder = nn.ModuleList(DecoderLayer(config) for _ in range(config.layers))
        self.ln_f = nn.LayerNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)

    def _embed(self, ids):
        return self.embed(ids) + self.pos(torch.arange(ids.shape[1]))

    def forward(self, input_ids, decoder_input_ids, labels=None):
        enc = self._embed(input_ids)
        for layer in self.encoder:
            enc = layer(enc)
        dec = self._embed(decoder_input_ids)
        for layer in self.decoder:
            dec = layer(dec, enc)
        logits = self.lm_head(self.ln_f(dec))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
        return {"loss": loss, "logits": logits}


def make_reversal_data(n, length, vocab, bos, g):
    src = torch.randint(2, vocab, (n, length), generator=g)
    labels = src.flip(1)
    dec_in = torch.cat([torch.full((n, 1), bos), labels[:, :-1]], 1)
    return src, dec_in, labels


class Seq2SeqTrainer:
    def __init__(self, model, train_data, eval_data, lr=3e-3, batch_size=64, epochs=5):
        self.model = model
        self.train_data = train_data
        self.eval_data = eval_data
        self.batch_size = batch_size
        self.epochs = epochs
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)

    def evaluate(self):
        self.model.eval()
        src, dec_in, labels = self.eval_data
        with torch.no_grad():
            out = self.model(src, dec_in, labels=labels)
            acc = (out["logits"].argmax(-1) == labels).float().mean().item()
        return out["loss"].item(), acc

    def train(self):
        src, dec_in, labels = self.train_data
        g = torch.Generator().manual_seed(1)
        step = 0
        for epoch in range(self.epochs):
            self.model.train()
            perm = torch.randperm(len(src), generator=g)
            for i in range(0, len(perm), self.batch_size):
                idx = perm[i:i + self.batch_size]
                self.optimizer.zero_grad()
                loss = self.model(src[idx], dec_in[idx], labels=labels[idx])["loss"]
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.optimizer.step()
                step += 1
            eval_loss, eval_acc = self.evaluate()
            print(f"epoch {epoch} step {step} train loss {loss.item():.4f} "
                  f"eval loss {eval_loss:.4f} eval token acc {eval_acc:.3f}")


def main():
    torch.manual_seed(0)
    config = TinyM2MConfig()
    g = torch.Generator().manual_seed(0)
    train_data = make_reversal_data(1024, 8, config.vocab_size, config.bos_token_id, g)
    eval_data = make_reversal_data(256, 8, config.vocab_size, config.bos_token_id, g)
    model = TinyM2MForConditionalGeneration(config)
    Seq2SeqTrainer(model, train_data, eval_data).train()


if __name__ == "__main__":
    main()
