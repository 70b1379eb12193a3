"""A from-scratch GPT written as a Lightning-style module: GPT(LightningModule-like) holds token
and learned position embeddings, a causal decoder stack and a LayerNorm + Linear next-token
classifier; get_losses(batch) runs the model on batch["input_ids"] with batch["attention_mask"]
and computes cross-entropy of out[:, :-1] against ids[:, 1:] plus accuracy and perplexity, which
training_step / validation_step log through log_dict; configure_optimizers builds AdamW and a
LambdaLR warmup-then-linear schedule that on_train_batch_end ticks, and a small Trainer.fit()
drives the epochs. The collate function pads every sentence to max_length with an added [PAD]
token, as a GPT-2 tokenizer with padding="max_length" does. The bug: get_losses never uses the
attention mask when it builds the loss, so every padded position is a next-token target too.
Most targets in a batch are "[PAD] follows [PAD]", which the model learns at once; the logged
train/val loss, accuracy and perplexity look excellent, while the loss on the real tokens, the
thing the model is for, improves far less because padding dilutes its gradient.

Thread: https://github.com/BrianPulfer/PapersReimplementations/pull/17
"""
import torch
import torch.nn as nn
from torch.optim import AdamW
from torch.optim.lr_scheduler import LambdaLR


class DecoderTransformer(nn.Module):
    def __init__(self, hidden_dim, n_heads, depth, dropout_p=0.1):
        super().__init__()
        layer = nn.TransformerEncoderLayer(hidden_dim, n_heads, 4 * hidden_dim, dropout=dropout_p,
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)

    def forward(self, hidden, self_attn_mask=None):
        t = hidden.shape[1]
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        pad = None if self_attn_mask is None else self_attn_mask == 0
        return self.blocks(hidden, mask=causal, src_key_padding_mask=pad)


class GPT(nn.Module):
    DEFAULT_GPT_CONFIG = {"lr": 1e-3, "betas": (0.9, 0.999), "weight_decay": 0.01,
                          "max_train_steps": 240, "warmup_steps": 30}

    def __init__(self, vocab_size, max_len, hidden_dim, n_heads, depth, dropout=0.1, train_config=None):
        super().__init__()
        self.vocab_size = vocab_size
        self.train_config = dict(GPT.DEFAULT_GPT_CONFIG)
        if train_config is not None:
            self.train_config.update(train_config)
        self.linear_scheduler = None
        self.embeddings = nn.Embedding(vocab_size, hidden_dim)
        self.pos_embeddings = nn.Embedding(max_len, hidden_dim)
        self.transformer = DecoderTransformer(hidden_dim, n_heads, depth, dropout_p=dropout)
        self.classifier = nn.Sequential(nn.LayerNorm(hidden_dim), nn.Linear(hidden_dim, vocab_size))
        self.logged = {}

    def forward(self, ids, attn_mask=None):
        b, t = ids.shape
        hidden = self.embeddings(ids) + self.pos_embeddings(torch.arange(t)).repeat(b, 1, 1)
        hidden = self.transformer(hidden, self_attn_mask=attn_mask)
        return self.classifier(hidden), hidden

    def get_losses(self, batch):
        ids = batch["input_ids"]
        attn_mask = batch["attention_mask"]
        out, _ = self(ids, attn_mask)
        preds, labels = out[:, :-1], ids[:, 1:]
        ce_loss = nn.functional.cross_entropy(preds.reshape(-1, self.vocab_size), labels.reshape(-1))
        accuracy = (preds.argmax(dim=-1) == labels).float().mean()
        perplexity = torch.exp(ce_loss)
        return ce_loss, accuracy, perplexity

    def log_dict(self, d):
        for k, v in d.items():
            self.logged.setdefault(k, []).append(float(v.detach()))

    def configure_optimizers(self):
        optim = AdamW(self.parameters(), lr=self.train_config["lr"],
                      weight_decay=self.train_config["weight_decay"], betas=self.train_config["betas"])
        self.linear_scheduler = LambdaLR(optim, self.scheduler_fn)
        return {"optimizer": optim}

    def scheduler_fn(self, step):
        warmup_steps = self.train_config["warmup_steps"]
        max_steps = self.train_config["max_train_steps"]
        if step < warmup_steps:
            return step / warmup_steps
        return max(0.0, 1 - (step - warmup_steps) / (max_steps - warmup_steps))

    def on_train_batch_end(self):
        if self.linear_scheduler is not None:
            self.linear_scheduler.step()

    def training_step(self, batch, batch_idx):
        ce_loss, accuracy, perplexity = self.get_losses(batch)
        self.log_dict({"train_loss": ce_loss, "train_acc": accuracy, "train_ppl": perplexity})
        return ce_loss

    def validation_step(self, batch, batch_idx):
        ce_loss, accuracy, perplexity = self.get_losses(batch)
        self.log_dict({"val_loss": ce_loss, "val_acc": accuracy, "val_ppl": perplexity})
        return ce_loss


class Trainer:
    def __init__(self, max_steps):
        self.max_steps = max_steps

    def fit(self, model, train_loader, val_loader):
        optim = model.configure_optimizers()["optimizer"]
        step = 0
        while step < self.max_steps:
            model.train()
            for batch_idx, batch in enumerate(train_loader()):
                loss = model.training_step(batch, batch_idx)
                optim.zero_grad()
                loss.backward()
                optim.step()
                model.on_train_batch_end()
                step += 1
                if step % 60 == 0:
                    model.eval()
                    model.logged.pop("val_loss", None), model.logged.pop("val_acc", None), model.logged.pop("val_ppl", None)
                    with torch.no_grad():
                        for vi, vb in enumerate(val_loader()):
                            model.validation_step(vb, vi)
                    lg = model.logged
                    print(f"step {step:4d} | train_loss {sum(lg['train_loss'][-60:]) / 60:.3f} "
                          f"train_acc {sum(lg['train_acc'][-60:]) / 60:.3f} | val_loss "
                          f"{sum(lg['val_loss']) / len(lg['val_loss']):.3f} val_acc "
                          f"{sum(lg['val_acc']) / len(lg['val_acc']):.3f} val_ppl "
                          f"{sum(lg['val_ppl']) / len(lg['val_ppl']):.2f}")
                    model.train()
                if step >= self.max_steps:
                    break


def make_sentences(n, gen, n_words=40):
    """Short synthetic sentences (4-14 tokens) from a first-order grammar over 40 word ids."""
    trans = torch.softmax(torch.randn(n_words, n_words, generator=gen) * 3.0, dim=1)
    out = []
    for _ in range(n):
        length = int(torch.randint(4, 15, (1,), generator=gen))
        w = int(torch.randint(0, n_words, (1,), generator=gen))
        s = [w]
        for _ in range(length - 1):
            w = int(torch.multinomial(trans[w], 1, generator=gen))
            s.append(w)
        out.append(s)
    return out


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    n_words, max_len, batch_size = 40, 48, 32
    pad_id = n_words                      # "[PAD]" added to the tokenizer
    vocab_size = n_words + 1
    sentences = make_sentences(1600, gen, n_words)
    train_s, val_s = sentences[:1400], sentences[1400:]

    def collate(batch):
        ids = torch.full((len(batch), max_len), pad_id, dtype=torch.long)
        mask = torch.zeros(len(batch), max_len, dtype=torch.long)
        for i, s in enumerate(batch):
            ids[i, :len(s)] = torch.tensor(s)
            mask[i, :len(s)] = 1
        return {"input_ids": ids, "attention_mask": mask}

    def train_loader():
        perm = torch.randperm(len(train_s), generator=gen).tolist()
        for i in range(0, len(perm) - batch_size + 1, batch_size):
            yield collate([train_s[j] for j in perm[i:i + batch_size]])

    def val_loader():
        for i in range(0, len(val_s), batch_size):
            yield collate(val_s[i:i + batch_size])

    gpt = GPT(vocab_size, max_len, hidden_dim=64, n_heads=4, depth=2, dropout=0.1)
    Trainer(max_steps=240).fit(gpt, train_loader, val_loader)


if __name__ == "__main__":
    main()
