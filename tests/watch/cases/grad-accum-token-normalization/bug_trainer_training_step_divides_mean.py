"""A Hugging Face-style Trainer for token classification with padding labelled -100:
compute_loss() returns nn.CrossEntropyLoss's mean over the micro-batch's labelled tokens, and
training_step() divides it by args.gradient_accumulation_steps before backward(). A quarter of the
sentences are long and the rest short, so the micro-batches of one window hold different token
counts and each update is an average of per-micro-batch averages."""
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

VOCAB, TAGS, T = 80, 5, 40


@dataclass
class TrainingArguments:
    per_device_train_batch_size: int = 8
    gradient_accumulation_steps: int = 4
    learning_rate: float = 2e-3
    max_steps: int = 60


class Sentences(Dataset):
    def __init__(self, n, g):
        self.ids = torch.randint(1, VOCAB, (n, T), generator=g)
        self.labels = self.ids % TAGS
        lengths = torch.where((torch.arange(n) // 8) % 4 == 0, 36, 3)   # a quarter long, the rest short
        pad = torch.arange(T) >= lengths[:, None]
        self.ids[pad], self.labels[pad] = 0, -100

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32, padding_idx=0)
        self.encoder = nn.LSTM(32, 32, batch_first=True, bidirectional=True)
        self.classifier = nn.Linear(64, TAGS)

    def forward(self, input_ids):
        return self.classifier(self.encoder(self.embed(input_ids))[0])


class Trainer:
    def __init__(self, model, args, train_dataset):
        self.model, self.args, self.train_dataset = model, args, train_dataset
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
        self.loss_fct = nn.CrossEntropyLoss()

    def compute_loss(self, model, inputs):
        logits = model(inputs["input_ids"])
        return self.loss_fct(logits.view(-1, TAGS), inputs["labels"].view(-1))

    def training_step(self, model, inputs):
        model.train()
        loss = self.compute_loss(model, inputs)
        loss = loss / self.args.gradient_accumulation_steps
        loss.backward()
        return loss.detach()

    def train(self):
        loader = DataLoader(self.train_dataset, batch_size=self.args.per_device_train_batch_size, shuffle=True,
                            generator=torch.Generator().manual_seed(0))
        step = 0
        while step < self.args.max_steps:
            for i, inputs in enumerate(loader):
                loss = self.training_step(self.model, inputs)
                if (i + 1) % self.args.gradient_accumulation_steps == 0:
                    self.optimizer.step()
                    self.optimizer.zero_grad()
                    step += 1
                    if step % 20 == 0:
                        print(f"step {step} loss {loss.item():.4f}")
                    if step >= self.args.max_steps:
                        break


def main():
    torch.manual_seed(0)
    Trainer(Tagger(), TrainingArguments(), Sentences(2048, torch.Generator().manual_seed(0))).train()


if __name__ == "__main__":
    main()
