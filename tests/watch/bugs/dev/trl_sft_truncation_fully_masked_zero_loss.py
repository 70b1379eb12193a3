"""Prompt-completion SFT in the shape of an SFTTrainer with completion_only_loss=True: dataset
preparation tokenizes prompt and completion and records a completion mask, the collator truncates
every example to max_length and sets the labels of prompt tokens (and padding) to -100, and
compute_loss returns a graph-connected zero loss when a micro-batch has no label left. Examples
whose prompt alone fills max_length keep no completion token at all; they are not dropped, so
micro-batches made of them train on nothing and log loss 0.0, and the others are diluted by
examples that carry no signal.

Thread: https://github.com/huggingface/trl/pull/6320
"""
import torch
import torch.nn.functional as F
from torch import nn

PAD, BOS, EOS, SEP = 0, 1, 2, 3
VOCAB = 4 + 20


def make_dataset(n, seed):
    g = torch.Generator().manual_seed(seed)
    rows = []
    for _ in range(n):
        long_prompt = bool(torch.rand(1, generator=g) < 0.4)
        n_prompt = int(torch.randint(26, 34, (1,), generator=g)) if long_prompt else int(torch.randint(3, 8, (1,), generator=g))
        prompt = torch.randint(4, VOCAB, (n_prompt,), generator=g).tolist()
        completion = [4 + (t - 4 + 1) % 20 for t in prompt[-3:]] + [EOS]  # answer depends on the prompt's end
        rows.append({"prompt": [BOS] + prompt + [SEP], "completion": completion})
    return rows


def tokenize_fn(example):
    return {"input_ids": example["prompt"] + example["completion"],
            "completion_mask": [0] * len(example["prompt"]) + [1] * len(example["completion"])}


class DataCollatorForLanguageModeling:
    def __init__(self, max_length, completion_only_loss=True):
        self.max_length, self.completion_only_loss = max_length, completion_only_loss

    def __call__(self, examples):
        ids = [e["input_ids"][:self.max_length] for e in examples]
        masks = [e["completion_mask"][:self.max_length] for e in examples]
        width = max(len(x) for x in ids)
        input_ids = torch.full((len(ids), width), PAD)
        labels = torch.full((len(ids), width), -100)
        for i, (x, m) in enumerate(zip(ids, masks)):
            input_ids[i, :len(x)] = torch.tensor(x)
            keep = torch.tensor(m).bool() if self.completion_only_loss else torch.ones(len(x), dtype=torch.bool)
            labels[i, :len(x)] = torch.where(keep, torch.tensor(x), torch.tensor(-100))
        return {"input_ids": input_ids, "labels": labels}


class TinyCausalLM(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.lm_head = nn.Linear(dim, VOCAB)

    def forward(self, input_ids):
        return self.lm_head(self.rnn(self.embed(input_ids))[0])


class SFTTrainer:
    def __init__(self, model, train_dataset, max_length=24, batch_size=2, lr=2e-3, epochs=1):
        self.model = model
        self.train_dataset = [tokenize_fn(e) for e in train_dataset]
        self.collator = DataCollatorForLanguageModeling(max_length)
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
        self.batch_size, self.epochs = batch_size, epochs

    def compute_loss(self, model, inputs):
        logits = model(inputs["input_ids"])
        shift_labels = inputs["labels"][:, 1:]
        if (shift_labels != -100).sum() == 0:
            return logits.sum() * 0.0  # keeps the graph connected for distributed backward
        return F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), shift_labels.reshape(-1), ignore_index=-100)

    def train(self):
        g = torch.Generator().manual_seed(1)
        step = zero_steps = 0
        for epoch in range(self.epochs):
            self.model.train()
            order = torch.randperm(len(self.train_dataset), generator=g).tolist()
            for b in range(0, len(order), self.batch_size):
                inputs = self.collator([self.train_dataset[i] for i in order[b:b + self.batch_size]])
                loss = self.compute_loss(self.model, inputs)
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()
                step += 1
                zero_steps += int(loss.item() == 0.0)
                if step % 25 == 0:
                    print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
        print(f"{zero_steps} of {step} steps logged loss 0.0")


def main():
    torch.manual_seed(0)
    model = TinyCausalLM()
    SFTTrainer(model, make_dataset(600, seed=0)).train()


if __name__ == "__main__":
    main()
