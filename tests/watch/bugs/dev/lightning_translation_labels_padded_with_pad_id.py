"""A Lightning-style translation task over a Hugging Face-style encoder-decoder: a Seq2SeqDataModule
whose convert_to_features tokenizes source and target with padding="max_length" and stores the
target input_ids as "labels", a default collator that stacks them, and a Seq2SeqTransformer whose
training_step is outputs = self.model(**batch); loss = outputs[0]. The model shifts the labels
right to build the decoder input (T5 style, pad id 0 as the start token) and scores the logits with
CrossEntropyLoss, whose ignore_index is the default -100. The padded label positions still hold the
pad id 0, not -100, so every padding slot up to max_length is a target: most of the targets are
"predict pad", the logged loss is mostly the easy padding loss, and the real target tokens get a
small share of the gradient.

Thread: https://github.com/Lightning-Universe/lightning-transformers/issues/266
"""
import torch
from torch import nn

PAD, EOS = 0, 1


class ToyTokenizer:
    """Word-id 'tokenizer': text is already a list of ids; appends EOS and pads or truncates."""

    pad_token_id, eos_token_id = PAD, EOS

    def __call__(self, texts, max_length, padding="longest", truncation=True):
        seqs = [list(t)[: max_length - 1] + [EOS] for t in texts]
        width = max_length if padding == "max_length" else max(len(s) for s in seqs)
        ids = [s + [PAD] * (width - len(s)) for s in seqs]
        mask = [[1] * len(s) + [0] * (width - len(s)) for s in seqs]
        return {"input_ids": ids, "attention_mask": mask}


class Seq2SeqDataModule:
    def __init__(self, tokenizer, pairs, batch_size=16, max_source_length=32, max_target_length=32,
                 padding="max_length", seed=0):
        self.tokenizer, self.pairs, self.batch_size = tokenizer, pairs, batch_size
        self.max_source_length, self.max_target_length, self.padding = max_source_length, max_target_length, padding
        self.g = torch.Generator().manual_seed(seed)

    def convert_to_features(self, examples):
        model_inputs = self.tokenizer(examples["source"], max_length=self.max_source_length, padding=self.padding)
        labels = self.tokenizer(examples["target"], max_length=self.max_target_length, padding=self.padding)
        model_inputs["labels"] = labels["input_ids"]
        return model_inputs

    @staticmethod
    def collate_fn(features):
        return {k: torch.tensor(v) for k, v in features.items()}

    def train_dataloader(self):
        order = torch.randperm(len(self.pairs), generator=self.g).tolist()
        for i in range(0, len(order) - self.batch_size + 1, self.batch_size):
            chunk = [self.pairs[j] for j in order[i:i + self.batch_size]]
            feats = self.convert_to_features({"source": [s for s, _ in chunk], "target": [t for _, t in chunk]})
            yield self.collate_fn(feats)


class TinyEncoderDecoderLM(nn.Module):
    """Returns (loss, logits) when labels are given, like a transformers seq2seq LM."""

    def __init__(self, vocab_size, d_model=64, nhead=4, layers=2, max_len=64):
        super().__init__()
        self.shared = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.transformer = nn.Transformer(d_model, nhead, layers, layers, 128, dropout=0.1, batch_first=True)
        self.lm_head = nn.Linear(d_model, vocab_size)

    def _shift_right(self, labels):
        dec = labels.new_full(labels.shape, PAD)
        dec[:, 1:] = labels[:, :-1]
        return dec.masked_fill(dec == -100, PAD)

    def forward(self, input_ids, attention_mask, labels):
        dec_ids = self._shift_right(labels)
        src = self.shared(input_ids) + self.pos(torch.arange(input_ids.shape[1]))
        tgt = self.shared(dec_ids) + self.pos(torch.arange(dec_ids.shape[1]))
        causal = nn.Transformer.generate_square_subsequent_mask(dec_ids.shape[1])
        pad_mask = attention_mask == 0
        h = self.transformer(src, tgt, tgt_mask=causal, src_key_padding_mask=pad_mask,
                             memory_key_padding_mask=pad_mask)
        logits = self.lm_head(h)
        loss = nn.CrossEntropyLoss()(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
        return loss, logits


class Seq2SeqTransformer(nn.Module):
    def __init__(self, model, lr=5e-4):
        super().__init__()
        self.model, self.lr = model, lr

    def training_step(self, batch, batch_idx):
        outputs = self.model(**batch)
        loss = outputs[0]
        self.log("train_loss", loss, batch_idx)
        return loss

    def log(self, name, value, batch_idx):
        if batch_idx % 20 == 0:
            print(f"{name} {value.item():.4f}")

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.lr)


class Trainer:
    def __init__(self, max_epochs):
        self.max_epochs = max_epochs

    def fit(self, module, datamodule):
        opt = module.configure_optimizers()
        module.train()
        for epoch in range(self.max_epochs):
            for batch_idx, batch in enumerate(datamodule.train_dataloader()):
                loss = module.training_step(batch, batch_idx)
                opt.zero_grad()
                loss.backward()
                opt.step()


def make_pairs(n, vocab, seed):
    """'Translation': each source word maps to a fixed target word; target order is reversed."""
    g = torch.Generator().manual_seed(seed)
    table = torch.randperm(vocab - 2, generator=torch.Generator().manual_seed(5)) + 2
    pairs = []
    for _ in range(n):
        k = int(torch.randint(3, 9, (1,), generator=g))
        src = torch.randint(2, vocab, (k,), generator=g)
        pairs.append((src.tolist(), table[src.flip(0) - 2].tolist()))
    return pairs


def main():
    torch.manual_seed(0)
    vocab = 40
    dm = Seq2SeqDataModule(ToyTokenizer(), make_pairs(800, vocab, seed=0), batch_size=16,
                           max_source_length=32, max_target_length=32, padding="max_length")
    module = Seq2SeqTransformer(TinyEncoderDecoderLM(vocab))
    Trainer(max_epochs=2).fit(module, dm)


if __name__ == "__main__":
    main()
