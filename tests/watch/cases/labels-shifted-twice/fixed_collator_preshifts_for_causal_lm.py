"""Instruction-style fine-tuning of a small causal LM written like a Hugging Face model: forward(input_ids,
labels) computes its own loss and, like every causal-LM head there, shifts inside (logits[:, :-1]
against labels[:, 1:]). The dataset's collate function leaves the shift to the model: labels = a copy of
input_ids with -100 on the padding. A Trainer class runs the loop."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

VOCAB, PAD, KEYS = 40, 0, 16


class TinyCausalLM(nn.Module):
    def __init__(self, vocab=VOCAB, dim=64):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.lm_head = nn.Linear(dim, vocab)

    def forward(self, input_ids, labels=None):
        hidden, _ = self.rnn(self.wte(input_ids))
        logits = self.lm_head(hidden)
        loss = None
        if labels is not None:   # the model shifts, as causal-LM heads do
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1),
                                   ignore_index=-100)
        return loss, logits


def make_sequences(n, g):
    """Pairs (key, value(key)) repeated: every value token is fixed by the key before it."""
    seqs = []
    for _ in range(n):
        pairs = int(torch.randint(4, 9, (1,), generator=g))
        keys = torch.randint(1, KEYS + 1, (pairs,), generator=g)
        seqs.append(torch.stack([keys, keys + KEYS]).t().reshape(-1).tolist())
    return seqs


def collate(batch):
    width = max(len(s) for s in batch)
    input_ids = torch.full((len(batch), width), PAD)
    labels = torch.full((len(batch), width), -100)
    for row, seq in enumerate(batch):
        input_ids[row, :len(seq)] = torch.tensor(seq)
        labels[row, :len(seq)] = torch.tensor(seq)   # fixed: unshifted, the model shifts once
    return {"input_ids": input_ids, "labels": labels}


class Trainer:
    def __init__(self, model, dataset, lr=3e-3):
        self.model = model
        self.loader = DataLoader(dataset, batch_size=16, shuffle=True, collate_fn=collate)
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr)

    def train(self, epochs):
        self.model.train()
        for epoch in range(epochs):
            for batch in self.loader:
                loss, _ = self.model(**batch)
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()
            print(f"epoch {epoch} loss {loss.item():.4f}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    Trainer(TinyCausalLM(), make_sequences(512, g)).train(epochs=2)


if __name__ == "__main__":
    main()
