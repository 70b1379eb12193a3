"""Completion-only fine-tuning of a tiny causal LM in a Trainer with a compute_loss override. The
collator keeps the whole completion and cuts the prompt from the left when prompt + completion
exceed MAX_LEN, so every example keeps its labels; the `logits.sum() * 0.0` guard for a batch
without labels stays in compute_loss but never fires."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

VOCAB, MAX_LEN, BOS = 80, 20, 1


class TinyLM(nn.Module):
    def __init__(self, vocab=VOCAB, dim=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.lm_head = nn.Linear(dim, vocab)

    def forward(self, input_ids):
        return self.lm_head(self.rnn(self.embed(input_ids))[0])


def build_examples(n, g):
    out = []
    for i in range(n):
        long_prompt = i % 3 == 0
        length = int(torch.randint(20, 26, (1,), generator=g)) if long_prompt else int(torch.randint(4, 10, (1,), generator=g))
        prompt = [BOS] + torch.randint(3, VOCAB, (length,), generator=g).tolist()
        completion = torch.randint(3, VOCAB, (5,), generator=g).tolist()
        out.append({"prompt": prompt, "completion": completion})
    return out


class CompletionCollator:
    def __init__(self, max_length):
        self.max_length = max_length

    def __call__(self, features):
        kept = [f["prompt"][-(self.max_length - len(f["completion"])):] for f in features]
        ids = [p + f["completion"] for p, f in zip(kept, features)]
        labels = [[-100] * len(p) + f["completion"] for p, f in zip(kept, features)]
        width = max(map(len, ids))
        return {"input_ids": torch.tensor([x + [0] * (width - len(x)) for x in ids]),
                "labels": torch.tensor([y + [-100] * (width - len(y)) for y in labels])}


class Trainer:
    def __init__(self, model, dataset, collator, batch_size=2):
        self.model = model
        self.loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, collate_fn=collator,
                                 generator=torch.Generator().manual_seed(0))
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)

    def compute_loss(self, model, inputs):
        logits = model(inputs["input_ids"])[:, :-1]
        labels = inputs["labels"][:, 1:]
        if not (labels != -100).any():
            return logits.sum() * 0.0
        return F.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1), ignore_index=-100)

    def training_step(self, inputs):
        self.model.train()
        loss = self.compute_loss(self.model, inputs)
        loss.backward()
        return loss.detach()

    def train(self, epochs=2):
        logged = []
        for _ in range(epochs):
            for inputs in self.loader:
                logged.append(float(self.training_step(inputs)))
                self.optimizer.step()
                self.optimizer.zero_grad()
        return logged


def main():
    torch.manual_seed(0)
    data = build_examples(120, torch.Generator().manual_seed(1))
    logged = Trainer(TinyLM(), data, CompletionCollator(MAX_LEN)).train()
    print(f"{sum(v == 0.0 for v in logged)} of {len(logged)} steps logged 0.0; last {logged[-1]:.3f}")


if __name__ == "__main__":
    main()
