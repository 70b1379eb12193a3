"""Fine-tuning a decoder-only model on a generated task through a GenerationModelTrainer class in
the style of prompt2model: the tokenizer pads on the left with pad = eos, each example is
textualised as "<task 0>instruction / Example: input / Label: output<eos>", tokenize_dataset()
shuffles, batch-encodes all model inputs with padding=True and returns input_ids, attention_mask and
labels, and train_model(hyperparameter_choices, training_datasets) runs a Seq2SeqTrainer-style loop
(AdamW, weight decay 0.01, batch 100, 10 epochs). For the decoder-only case the labels are simply
input_ids, so the loss is computed on the task tag, the instruction, the example input and the
"Label:" marker as well as on the output: most scored tokens are prompt tokens the model is not
meant to produce, the logged loss flattens far above zero, and the model is trained to write
prompts too.

Thread: https://github.com/neulab/prompt2model/pull/167
"""
import torch
import torch.nn.functional as F
from torch import nn

CHARS = "abcdefghijklmnopqrstuvwxyz<>: \n0"
INSTRUCTION = "repeat the word"


class CharTokenizer:
    def __init__(self, padding_side="right"):
        self.padding_side = padding_side
        self.eos_token_id = len(CHARS)
        self.pad_token_id = None
        self.vocab_size = len(CHARS) + 1

    def encode(self, text):
        return [CHARS.index(c) for c in text]

    def batch_encode_plus(self, texts, truncation=True, max_length=None, padding=True):
        ids = [self.encode(t[:-5]) + [self.eos_token_id] if t.endswith("<eos>") else self.encode(t) for t in texts]
        if truncation and max_length:
            ids = [x[:max_length] for x in ids]
        width = max(len(x) for x in ids) if padding else None
        out = {"input_ids": [], "attention_mask": []}
        for x in ids:
            n = width - len(x)
            if self.padding_side == "left":
                out["input_ids"].append([self.pad_token_id] * n + x)
                out["attention_mask"].append([0] * n + [1] * len(x))
            else:
                out["input_ids"].append(x + [self.pad_token_id] * n)
                out["attention_mask"].append([1] * len(x) + [0] * n)
        return out


class TinyCausalLM(nn.Module):
    def __init__(self, vocab, dim=64, layers=2, heads=4, max_len=64):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(max_len, dim)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=0.0, batch_first=True, norm_first=True)
            for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.pad_token_id = None

    def forward(self, input_ids, attention_mask=None, labels=None):
        t = input_ids.size(1)
        h = self.wte(input_ids) + self.wpe(torch.arange(t))
        mask = torch.triu(torch.full((t, t), -1e9), diagonal=1)
        if attention_mask is not None:
            mask = mask + (1.0 - attention_mask[:, None, None, :].float()) * -1e9
            mask = mask.expand(-1, self.blocks[0].self_attn.num_heads, -1, -1).reshape(-1, t, t)
        for block in self.blocks:
            h = block(h, src_mask=mask)
        logits = self.lm_head(self.ln_f(h))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1))
        return {"loss": loss, "logits": logits}


def make_dataset(n, seed):
    g = torch.Generator().manual_seed(seed)
    rows = []
    for _ in range(n):
        k = 5
        word = [int(i) for i in torch.randint(0, 26, (k,), generator=g)]
        rows.append({"input_col": "".join(CHARS[i] for i in word),
                     "model_output": "".join(CHARS[i] for i in word)})
    return rows


class GenerationModelTrainer:
    def __init__(self, has_encoder=False, tokenizer_max_length=64):
        self.has_encoder = has_encoder
        self.tokenizer_max_length = tokenizer_max_length
        self.model = TinyCausalLM(len(CHARS) + 1)
        self.tokenizer = CharTokenizer(padding_side="left")
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token_id = self.tokenizer.eos_token_id
        if self.model.pad_token_id is None:
            self.model.pad_token_id = self.tokenizer.eos_token_id

    @staticmethod
    def textualize(row):
        return f"<0>{INSTRUCTION}\nexample:\n{row['input_col']}\nlabel:\n{row['model_output']}<eos>"

    def tokenize_dataset(self, dataset, seed):
        order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed)).tolist()
        inputs = [self.textualize(dataset[i]) for i in order]
        input_encodings = self.tokenizer.batch_encode_plus(
            inputs, truncation=True, max_length=self.tokenizer_max_length, padding=True)
        return {
            "input_ids": torch.tensor(input_encodings["input_ids"]),
            "attention_mask": torch.tensor(input_encodings["attention_mask"]),
            "labels": torch.tensor(input_encodings["input_ids"]),
        }

    def train_model(self, hyperparameter_choices, training_datasets):
        epochs = hyperparameter_choices.get("num_train_epochs", 10)
        bs = hyperparameter_choices.get("per_device_train_batch_size", 100)
        optimizer = torch.optim.AdamW(self.model.parameters(), lr=hyperparameter_choices.get("learning_rate", 1e-4),
                                      weight_decay=hyperparameter_choices.get("weight_decay", 0.01))
        train = self.tokenize_dataset([row for ds in training_datasets for row in ds], seed=0)
        n = train["input_ids"].size(0)
        g = torch.Generator().manual_seed(1)
        step = 0
        for epoch in range(epochs):
            self.model.train()
            perm = torch.randperm(n, generator=g)
            for b in range(0, n, bs):
                idx = perm[b:b + bs]
                loss = self.model(**{k: v[idx] for k, v in train.items()})["loss"]
                loss.backward()
                nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad()
                step += 1
                if step % 10 == 0:
                    print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
        return self.model, self.tokenizer

    def exact_match(self, dataset):
        self.model.eval()
        hits = 0
        with torch.no_grad():
            for row in dataset:
                ids = self.tokenizer.encode(self.textualize(row)[:-5 - len(row["model_output"])])
                for _ in range(len(row["model_output"])):
                    ids.append(int(self.model(torch.tensor([ids]))["logits"][0, -1].argmax()))
                hits += "".join(CHARS[i] if i < len(CHARS) else "" for i in ids[-len(row["model_output"]):]) \
                    == row["model_output"]
        return hits / len(dataset)


def main():
    torch.manual_seed(0)
    trainer = GenerationModelTrainer()
    trainer.train_model({"num_train_epochs": 10, "per_device_train_batch_size": 100, "learning_rate": 3e-3,
                         "weight_decay": 0.01}, [make_dataset(800, seed=0)])
    print(f"exact match on held-out examples: {trainer.exact_match(make_dataset(100, seed=1)):.2f}")


if __name__ == "__main__":
    main()
