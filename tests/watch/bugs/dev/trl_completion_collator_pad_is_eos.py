"""Instruction fine-tuning of a small causal LM with a completion-only collator. The tokenizer has
no pad token, so it is set to the eos token (tokenizer.pad_token = tokenizer.eos_token); the
collator inherits its labels from a language-modeling collator that copies input_ids and sets every
position equal to pad_token_id to -100, then masks everything up to the response template. Each
example ends in eos, but since eos == pad its label is -100 too: the model is never trained to end
an answer, and after fine-tuning it almost never emits eos where the answer stops.

Thread: https://github.com/huggingface/trl/issues/976
"""
import torch
import torch.nn.functional as F
from torch import nn

CHARS = "abcdefghijklmnopqrstuvwxyz#:? \n"


class CharTokenizer:
    bos_token_id, eos_token_id = 1, 2

    def __init__(self):
        self.pad_token_id = None
        self.vocab_size = len(CHARS) + 3

    def encode(self, text):
        return [CHARS.index(c) + 3 for c in text]

    def __call__(self, text):
        return [self.bos_token_id] + self.encode(text) + [self.eos_token_id]


class DataCollatorForLanguageModeling:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def torch_call(self, examples):
        width = max(len(e) for e in examples)
        input_ids = torch.full((len(examples), width), self.tokenizer.pad_token_id)
        for i, e in enumerate(examples):
            input_ids[i, :len(e)] = torch.tensor(e)
        labels = input_ids.clone()
        if self.tokenizer.pad_token_id is not None:
            labels[labels == self.tokenizer.pad_token_id] = -100
        return {"input_ids": input_ids, "attention_mask": (labels != -100).long(), "labels": labels}


class DataCollatorForCompletionOnlyLM(DataCollatorForLanguageModeling):
    def __init__(self, response_template, tokenizer):
        super().__init__(tokenizer)
        self.response_token_ids = tokenizer.encode(response_template)

    def torch_call(self, examples):
        batch = super().torch_call(examples)
        n = len(self.response_token_ids)
        for i, e in enumerate(examples):
            for start in range(len(e) - n + 1):
                if e[start:start + n] == self.response_token_ids:
                    batch["labels"][i, :start + n] = -100
                    break
        return batch


class TinyCausalLM(nn.Module):
    def __init__(self, vocab_size, dim=96):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab_size, dim)
        self.rnn = nn.GRU(dim, dim, num_layers=2, batch_first=True)
        self.lm_head = nn.Linear(dim, vocab_size)

    def forward(self, input_ids, attention_mask=None, labels=None):
        logits = self.lm_head(self.rnn(self.embed_tokens(input_ids))[0])
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1),
                                   ignore_index=-100)
        return loss, logits


def make_examples(n, seed):
    g = torch.Generator().manual_seed(seed)
    texts = []
    for _ in range(n):
        k = int(torch.randint(3, 8, (1,), generator=g))
        word = "".join(CHARS[int(i)] for i in torch.randint(0, 26, (k,), generator=g))
        texts.append((f"#q: {word}?\n#a:", f" {word}"))
    return texts


def main():
    torch.manual_seed(0)
    tokenizer = CharTokenizer()
    tokenizer.pad_token_id = tokenizer.eos_token_id
    collator = DataCollatorForCompletionOnlyLM("#a:", tokenizer)
    train = [tokenizer(q + a) for q, a in make_examples(1920, seed=0)]
    model = TinyCausalLM(tokenizer.vocab_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    step = 0
    for epoch in range(3):
        model.train()
        order = torch.randperm(len(train), generator=g).tolist()
        for b in range(0, len(order), 48):
            batch = collator.torch_call([train[i] for i in order[b:b + 48]])
            loss, _ = model(**batch)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
            step += 1
            if step % 20 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
    model.eval()
    stops = 0
    eval_set = make_examples(200, seed=1)
    with torch.no_grad():
        for q, a in eval_set:
            ids = torch.tensor([[tokenizer.bos_token_id] + tokenizer.encode(q + a)])
            stops += int(model(ids)[1][0, -1].argmax() == tokenizer.eos_token_id)
    print(f"answers followed by eos: {stops}/{len(eval_set)}")


if __name__ == "__main__":
    main()
