"""A T0-style multiple-choice fine-tune of a decoder-only LM. The training loop is a plain
accelerate-like loop (DataLoader, AdamW, linear schedule, loss.backward / step / zero_grad) over
"prompt + answer" rows with -100 on the prompt and the padding. After every epoch an evaluate()
helper scores each example by rank classification through a DecoderModel wrapper: a multiple-
choice collator pads the prompts with tokenizer.pad (padding_side left at its default "right")
and the answer choices separately, and DecoderModel.forward concatenates [input_ids | labels],
builds position ids from the attention mask, runs the LM and reads the choice log-probs from
logits[:, prefix_length - 1:-1]. For every prompt shorter than the longest in the batch the
position prefix_length - 1 is a pad (the eos token, GPT-2 style), so the first answer token is
scored from a pad slot, where the model predicts the start of a new document, instead of from the
last prompt token; the reported accuracy is wrong and depends on the eval batch size (with batch
size 1 there is no padding).

Thread: https://github.com/bigscience-workshop/t-zero/issues/29
"""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

EOS, BOS, SEP = 0, 1, 2
CHOICE_WORDS = {"yes": [3, 4], "no": [5, 6], "maybe": [7, 8]}
KEYWORDS = [9, 10, 11]  # which one occurs in the premise decides the answer
FIRST_FILLER, VOCAB = 12, 48


class ToyTokenizer:
    eos_token_id = EOS
    pad_token_id = EOS  # GPT-2 style: no pad token of its own, the eos token pads
    padding_side = "right"

    def pad(self, features, key="input_ids"):
        longest = max(len(f[key]) for f in features)
        ids, mask = [], []
        for f in features:
            n = longest - len(f[key])
            if self.padding_side == "right":
                ids.append(f[key] + [self.pad_token_id] * n)
                mask.append([1] * len(f[key]) + [0] * n)
            else:
                ids.append([self.pad_token_id] * n + f[key])
                mask.append([0] * n + [1] * len(f[key]))
        return {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask)}


def make_examples(n, seed):
    """Premises of 4-20 filler tokens with one keyword hidden inside; answer = keyword's class."""
    g = torch.Generator().manual_seed(seed)
    names = list(CHOICE_WORDS)
    out = []
    for _ in range(n):
        length = int(torch.randint(4, 21, (1,), generator=g))
        premise = torch.randint(FIRST_FILLER, VOCAB, (length,), generator=g).tolist()
        label = int(torch.randint(0, 3, (1,), generator=g))
        premise[int(torch.randint(0, length, (1,), generator=g))] = KEYWORDS[label]
        out.append({"prompt": [BOS] + premise + [SEP], "target": label, "choices": names})
    return out


class TrainDataset(Dataset):
    """Rows of two examples back to back, each closed by eos (as documents are in the LM's
    pretraining stream); the loss covers the answers, the eos and the bos that follows it."""

    def __init__(self, examples):
        self.examples = examples

    def __len__(self):
        return len(self.examples) // 2

    def __getitem__(self, i):
        ids, labels = [], []
        for ex in self.examples[2 * i: 2 * i + 2]:
            answer = CHOICE_WORDS[ex["choices"][ex["target"]]] + [EOS]
            ids += ex["prompt"] + answer
            labels += [BOS if labels else -100] + [-100] * (len(ex["prompt"]) - 1) + answer
        return {"input_ids": ids, "labels": labels}


def train_collate(features):
    longest = max(len(f["input_ids"]) for f in features)
    ids = [f["input_ids"] + [EOS] * (longest - len(f["input_ids"])) for f in features]
    labels = [f["labels"] + [-100] * (longest - len(f["labels"])) for f in features]
    mask = [[1] * len(f["input_ids"]) + [0] * (longest - len(f["input_ids"])) for f in features]
    return {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask), "labels": torch.tensor(labels)}


class DataCollatorForMultipleChoice:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def __call__(self, features):
        flat = [{"input_ids": f["prompt"], "labels": CHOICE_WORDS[c]} for f in features for c in f["choices"]]
        batch = self.tokenizer.pad(flat)
        longest = max(len(x["labels"]) for x in flat)
        batch["labels"] = torch.tensor([x["labels"] + [self.tokenizer.pad_token_id] * (longest - len(x["labels"])) for x in flat])
        batch["labels_attention_mask"] = torch.tensor(
            [[1] * len(x["labels"]) + [0] * (longest - len(x["labels"])) for x in flat])
        batch["targets"] = torch.tensor([f["target"] for f in features])
        return batch


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x, bias):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads) + bias
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))


class TinyCausalLM(nn.Module):
    """GPT-2-like: causal mask plus key padding mask; position_ids default to arange."""

    def __init__(self, dim=64, heads=4, layers=2, max_pos=64):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, dim), nn.Embedding(max_pos, dim)
        self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(layers)])
        self.ln_f, self.lm_head = nn.LayerNorm(dim), nn.Linear(dim, VOCAB, bias=False)

    def forward(self, input_ids, attention_mask=None, position_ids=None, labels=None):
        b, t = input_ids.shape
        if position_ids is None:
            position_ids = torch.arange(t).expand(b, t)
        if attention_mask is None:
            attention_mask = torch.ones(b, t)
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        allowed = causal[None] & attention_mask.bool()[:, None, :]
        bias = torch.zeros(b, 1, t, t).masked_fill(~allowed[:, None], torch.finfo(torch.float32).min)
        x = self.wte(input_ids) + self.wpe(position_ids.clamp(min=0))
        for blk in self.blocks:
            x = blk(x, bias)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1), ignore_index=-100)
        return type("Output", (), {"loss": loss, "logits": logits})()


class DecoderModel(nn.Module):
    def __init__(self, lm):
        super().__init__()
        self._model = lm

    def forward(self, batch):
        _, prefix_length = batch["input_ids"].shape
        model_inputs = {
            "input_ids": torch.cat([batch["input_ids"], batch["labels"]], dim=-1),
            "attention_mask": torch.cat([batch["attention_mask"], batch["labels_attention_mask"]], dim=-1),
        }
        # position ids skip the padding between the prompt and the choice
        model_inputs["position_ids"] = torch.cumsum(model_inputs["attention_mask"], dim=-1) - 1
        logits = self._model(**model_inputs).logits[:, prefix_length - 1:-1]
        masked_log_probs = batch["labels_attention_mask"].unsqueeze(-1) * torch.log_softmax(logits, dim=-1)
        seq_token_log_probs = torch.gather(masked_log_probs, -1, batch["labels"].unsqueeze(-1))
        seq_log_prob = seq_token_log_probs.squeeze(-1).sum(-1).view(batch["targets"].size(0), -1)
        return seq_log_prob.argmax(dim=-1)


def evaluate(model, eval_dataloader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for batch in eval_dataloader:
            predictions = model(batch)
            correct += (predictions == batch["targets"]).sum().item()
            total += len(predictions)
    model.train()
    return correct / total


def main():
    torch.manual_seed(0)
    tokenizer = ToyTokenizer()
    train_examples, eval_examples = make_examples(2400, seed=1), make_examples(240, seed=2)
    train_dataloader = DataLoader(TrainDataset(train_examples), batch_size=32, shuffle=True,
                                  collate_fn=train_collate, generator=torch.Generator().manual_seed(0))
    eval_dataloader = DataLoader(eval_examples, batch_size=16, collate_fn=DataCollatorForMultipleChoice(tokenizer))

    lm = TinyCausalLM()
    model = DecoderModel(lm)
    optimizer = torch.optim.AdamW(lm.parameters(), lr=3e-3, weight_decay=0.01)
    num_epochs = 3
    total_steps = num_epochs * len(train_dataloader)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: max(0.0, 1 - s / total_steps))

    global_steps = 0
    for epoch in range(1, num_epochs + 1):
        lm.train()
        for batch in train_dataloader:
            loss = lm(**batch).loss
            loss.backward()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            global_steps += 1
            if global_steps % 20 == 0:
                print(f"epoch = {epoch}, step = {global_steps}, loss = {loss.item():.4f}")
        print(f"epoch = {epoch}, eval accuracy = {evaluate(model, eval_dataloader):.3f}")


if __name__ == "__main__":
    main()
