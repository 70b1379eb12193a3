"""Supervised fine-tuning through a train(model_args, data_args, train_args) function in the style of
fms-hf-tuning's sft_trainer: it loads the model and tokenizer, fills a special_tokens_dict with
defaults only for the special tokens the tokenizer lacks, resizes the embeddings for them, formats
each record with a "### Input: ... ### Response: ..." template followed by the eos token, collates
with a completion-only collator (a language-modelling collator that copies input_ids to labels and
sets every position equal to pad_token_id to -100, then masks everything up to the response
template) and runs an SFTTrainer-style loop. The tokenizer ships with its pad token equal to its
eos token, so no separate pad token is added and the collator's pad masking also masks the eos that
ends every response: the model is never trained to stop, and at inference it runs on past the
answer instead of emitting eos.

Thread: https://github.com/foundation-model-stack/fms-hf-tuning/pull/343
"""
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

CHARS = "abcdefghijklmnopqrstuvwxyz#:\n "
DEFAULT_PAD_TOKEN, DEFAULT_EOS_TOKEN, DEFAULT_BOS_TOKEN, DEFAULT_UNK_TOKEN = "<PAD>", "</s>", "<s>", "<unk>"


class PretrainedTokenizer:
    """Character tokenizer whose saved config sets pad_token to the eos token."""

    def __init__(self):
        self.vocab = {"<|endoftext|>": 0, "<unk>": 1}
        for c in CHARS:
            self.vocab[c] = len(self.vocab)
        self.eos_token = "<|endoftext|>"
        self.pad_token = "<|endoftext|>"
        self.bos_token = None
        self.unk_token = "<unk>"

    def add_special_tokens(self, special_tokens_dict):
        added = 0
        for key, tok in special_tokens_dict.items():
            if tok not in self.vocab:
                self.vocab[tok] = len(self.vocab)
                added += 1
            setattr(self, key, tok)
        return added

    @property
    def pad_token_id(self):
        return self.vocab[self.pad_token]

    @property
    def eos_token_id(self):
        return self.vocab[self.eos_token]

    def __len__(self):
        return len(self.vocab)

    def encode(self, text, add_special_tokens=True):
        out, i = [], 0
        while i < len(text):
            if text.startswith(self.eos_token, i):
                out.append(self.eos_token_id)
                i += len(self.eos_token)
            else:
                out.append(self.vocab.get(text[i], 1))
                i += 1
        return out


class CausalLM(nn.Module):
    def __init__(self, vocab_size, dim=96):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab_size, dim)
        self.rnn = nn.GRU(dim, dim, num_layers=2, batch_first=True)
        self.lm_head = nn.Linear(dim, vocab_size)

    def resize_token_embeddings(self, n):
        old_e, old_h = self.embed_tokens, self.lm_head
        if n == old_e.num_embeddings:
            return
        self.embed_tokens = nn.Embedding(n, old_e.embedding_dim)
        self.lm_head = nn.Linear(old_e.embedding_dim, n)
        with torch.no_grad():
            k = old_e.num_embeddings
            self.embed_tokens.weight[:k] = old_e.weight
            self.embed_tokens.weight[k:] = old_e.weight.mean(0)
            self.lm_head.weight[:k] = old_h.weight
            self.lm_head.bias[:k] = old_h.bias

    def forward(self, input_ids, attention_mask=None, labels=None):
        logits = self.lm_head(self.rnn(self.embed_tokens(input_ids))[0])
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1))
        return {"loss": loss, "logits": logits}


class DataCollatorForCompletionOnlyLM:
    def __init__(self, response_template_ids, tokenizer, ignore_index=-100):
        self.response_template_ids = response_template_ids
        self.tokenizer = tokenizer
        self.ignore_index = ignore_index

    def __call__(self, examples):
        width = max(len(e) for e in examples)
        input_ids = torch.full((len(examples), width), self.tokenizer.pad_token_id)
        for i, e in enumerate(examples):
            input_ids[i, :len(e)] = torch.tensor(e)
        labels = input_ids.clone()
        labels[labels == self.tokenizer.pad_token_id] = self.ignore_index
        n = len(self.response_template_ids)
        for i, e in enumerate(examples):
            for start in range(len(e) - n + 1):
                if e[start:start + n] == self.response_template_ids:
                    labels[i, :start + n] = self.ignore_index
                    break
        attention_mask = torch.zeros_like(input_ids)
        for i, e in enumerate(examples):
            attention_mask[i, :len(e)] = 1
        return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


@dataclass
class TrainArguments:
    learning_rate: float = 5e-3
    per_device_train_batch_size: int = 32
    num_train_epochs: int = 3
    max_grad_norm: float = 1.0


class SFTTrainer:
    def __init__(self, model, args, train_dataset, data_collator):
        self.model, self.args, self.train_dataset, self.data_collator = model, args, train_dataset, data_collator
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)

    def train(self):
        g = torch.Generator().manual_seed(1)
        bs, step = self.args.per_device_train_batch_size, 0
        for epoch in range(self.args.num_train_epochs):
            self.model.train()
            order = torch.randperm(len(self.train_dataset), generator=g).tolist()
            for b in range(0, len(order), bs):
                batch = self.data_collator([self.train_dataset[i] for i in order[b:b + bs]])
                loss = self.model(**batch)["loss"]
                loss.backward()
                nn.utils.clip_grad_norm_(self.model.parameters(), self.args.max_grad_norm)
                self.optimizer.step()
                self.optimizer.zero_grad()
                step += 1
                if step % 20 == 0:
                    print(f"epoch {epoch} step {step} loss {loss.item():.4f}")


def make_records(n, seed):
    g = torch.Generator().manual_seed(seed)
    records = []
    for _ in range(n):
        k = int(torch.randint(3, 7, (1,), generator=g))
        word = "".join(CHARS[int(i)] for i in torch.randint(0, 26, (k,), generator=g))
        records.append({"input": word, "output": "yes" if word[0] in "aeiou" else "no"})
    return records


def train(model_args, data_args, train_args):
    torch.manual_seed(0)
    tokenizer = PretrainedTokenizer()
    model = CausalLM(len(tokenizer))
    special_tokens_dict = {}
    if tokenizer.pad_token is None:
        special_tokens_dict["pad_token"] = DEFAULT_PAD_TOKEN
    if tokenizer.eos_token is None:
        special_tokens_dict["eos_token"] = DEFAULT_EOS_TOKEN
    if tokenizer.bos_token is None:
        special_tokens_dict["bos_token"] = DEFAULT_BOS_TOKEN
    if tokenizer.unk_token is None:
        special_tokens_dict["unk_token"] = DEFAULT_UNK_TOKEN
    tokenizer.add_special_tokens(special_tokens_dict)
    model.resize_token_embeddings(len(tokenizer))

    template = data_args["data_formatter_template"]
    texts = [template.format(**r) + tokenizer.eos_token for r in make_records(data_args["num_records"], seed=0)]
    train_dataset = [tokenizer.encode(t) for t in texts]
    response_template_ids = tokenizer.encode(data_args["response_template"], add_special_tokens=False)
    collator = DataCollatorForCompletionOnlyLM(response_template_ids, tokenizer=tokenizer, ignore_index=-100)
    SFTTrainer(model, train_args, train_dataset, collator).train()
    return model, tokenizer


def main():
    data_args = {"data_formatter_template": "### input: {input}\n### response:{output}",
                 "response_template": "### response:", "num_records": 800}
    model, tokenizer = train({}, data_args, TrainArguments())
    model.eval()
    stopped, records = 0, make_records(200, seed=1)
    with torch.no_grad():
        for r in records:
            ids = tokenizer.encode(data_args["data_formatter_template"].format(**r))
            for _ in range(6):
                nxt = int(model(torch.tensor([ids]))["logits"][0, -1].argmax())
                if nxt == tokenizer.eos_token_id:
                    stopped += 1
                    break
                ids.append(nxt)
    print(f"generations that emit eos within 6 new tokens: {stopped}/{len(records)}")


if __name__ == "__main__":
    main()
