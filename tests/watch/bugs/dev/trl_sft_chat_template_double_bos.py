"""Chat SFT in the shape of an SFTTrainer: a formatting function renders each conversation to text
with the tokenizer's chat template (which writes the BOS token itself), the trainer's non-packed
dataset preparation then tokenizes that text with the tokenizer's default add_special_tokens=True,
and a language-modeling collator copies input_ids into labels and masks padding. Every training
sequence therefore starts with two BOS tokens, while generation renders the prompt with
apply_chat_template(tokenize=True), which gives one; the fine-tuned behaviour is learned under one
prefix and used under another.

Thread: https://github.com/huggingface/trl/pull/1114
"""
import torch
import torch.nn.functional as F
from torch import nn

CHARS = "abcdefghijklmnop"


class ChatTokenizer:
    pad_token_id, bos_token_id, eos_token_id = 0, 1, 2
    bos_token, eos_token = "<s>", "</s>"
    special = {"<s>": 1, "</s>": 2, "[INST]": 3, "[/INST]": 4}

    def __init__(self):
        self.vocab_size = 5 + len(CHARS)

    def apply_chat_template(self, messages, tokenize=True, add_generation_prompt=False):
        text = self.bos_token
        for m in messages:
            text += f"[INST]{m['content']}[/INST]" if m["role"] == "user" else f"{m['content']}{self.eos_token}"
        return self(text, add_special_tokens=False) if tokenize else text

    def __call__(self, text, add_special_tokens=True):
        ids = [self.bos_token_id] if add_special_tokens else []
        i = 0
        while i < len(text):
            for tok, tid in self.special.items():
                if text.startswith(tok, i):
                    ids.append(tid)
                    i += len(tok)
                    break
            else:
                ids.append(5 + CHARS.index(text[i]))
                i += 1
        return ids


class DataCollatorForLanguageModeling:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def __call__(self, examples):
        width = max(len(e) for e in examples)
        input_ids = torch.full((len(examples), width), self.tokenizer.pad_token_id)
        for i, e in enumerate(examples):
            input_ids[i, :len(e)] = torch.tensor(e)
        labels = input_ids.clone()
        labels[labels == self.tokenizer.pad_token_id] = -100
        return {"input_ids": input_ids, "labels": labels}


class TinyCausalLM(nn.Module):
    def __init__(self, vocab_size, dim=64):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, vocab_size)

    def forward(self, input_ids, labels=None):
        logits = self.head(self.rnn(self.embed(input_ids))[0])
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1))
        return loss, logits


class SFTTrainer:
    def __init__(self, model, tokenizer, train_dataset, formatting_func, lr=3e-3, batch_size=32, epochs=3):
        self.model, self.tokenizer = model, tokenizer
        self.collator = DataCollatorForLanguageModeling(tokenizer)
        self.train_dataset = self._prepare_non_packed_dataloader(train_dataset, formatting_func)
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
        self.batch_size, self.epochs = batch_size, epochs

    def _prepare_non_packed_dataloader(self, dataset, formatting_func):
        return [self.tokenizer(formatting_func(example)) for example in dataset]

    def train(self):
        g = torch.Generator().manual_seed(1)
        step = 0
        for epoch in range(self.epochs):
            self.model.train()
            order = torch.randperm(len(self.train_dataset), generator=g).tolist()
            for b in range(0, len(order), self.batch_size):
                batch = self.collator([self.train_dataset[i] for i in order[b:b + self.batch_size]])
                loss, _ = self.model(**batch)
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()
                step += 1
                if step % 20 == 0:
                    print(f"epoch {epoch} step {step} loss {loss.item():.4f}")


def make_conversations(n, seed):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        k = int(torch.randint(2, 6, (1,), generator=g))
        word = "".join(CHARS[int(i)] for i in torch.randint(0, len(CHARS), (k,), generator=g))
        answer = "".join(CHARS[(CHARS.index(c) + 3) % len(CHARS)] for c in word)
        out.append([{"role": "user", "content": word}, {"role": "assistant", "content": answer}])
    return out


def main():
    torch.manual_seed(0)
    tokenizer = ChatTokenizer()
    model = TinyCausalLM(tokenizer.vocab_size)
    formatting_func = lambda conv: tokenizer.apply_chat_template(conv, tokenize=False)
    trainer = SFTTrainer(model, tokenizer, make_conversations(2400, seed=0), formatting_func)
    print("first training sequence:", trainer.train_dataset[0][:4])
    trainer.train()
    model.eval()
    correct = 0
    held_out = make_conversations(200, seed=1)
    with torch.no_grad():
        for conv in held_out:
            ids = tokenizer.apply_chat_template(conv[:1], tokenize=True, add_generation_prompt=True)
            target = tokenizer(conv[1]["content"], add_special_tokens=False) + [tokenizer.eos_token_id]
            for _ in range(len(target)):
                ids.append(int(model(torch.tensor([ids]))[1][0, -1].argmax()))
            correct += int(ids[-len(target):] == target)
    print(f"held-out exact-match answers: {correct}/{len(held_out)}")


if __name__ == "__main__":
    main()
