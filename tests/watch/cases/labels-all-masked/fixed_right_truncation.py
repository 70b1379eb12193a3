"""Supervised fine-tuning of a tiny causal language model with the prompt tokens masked to -100.
The prompts are longer than MAX_LEN; the fix cuts the prompt from the left so that the response
always fits, and every batch keeps its response tokens as labels."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

VOCAB, MAX_LEN, BOS = 64, 24, 1


class TinyLM(nn.Module):
    def __init__(self, vocab=VOCAB, dim=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.mix = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, vocab)

    def forward(self, ids):
        hidden, _ = self.mix(self.embed(ids))
        return self.head(hidden)


def make_examples(n, g):
    examples = []
    for _ in range(n):
        prompt = [BOS] + torch.randint(3, VOCAB, (int(torch.randint(24, 32, (1,), generator=g)),),
                                       generator=g).tolist()
        response = torch.randint(3, VOCAB, (6,), generator=g).tolist()
        examples.append((prompt, response))
    return examples


def collate(batch):
    ids, labels = [], []
    for prompt, response in batch:
        prompt = [BOS] + prompt[1:][-(MAX_LEN - len(response) - 1):]
        ids.append(prompt + response)
        labels.append([-100] * len(prompt) + response)
    width = max(len(i) for i in ids)
    ids = [i + [0] * (width - len(i)) for i in ids]
    labels = [lab + [-100] * (width - len(lab)) for lab in labels]
    return torch.tensor(ids), torch.tensor(labels)


class SFTTrainer:
    def __init__(self, model, loader):
        self.model, self.loader = model, loader
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)

    def compute_loss(self, ids, labels):
        logits = self.model(ids)[:, :-1]
        return F.cross_entropy(logits.reshape(-1, VOCAB), labels[:, 1:].reshape(-1))

    def train(self, epochs):
        for _ in range(epochs):
            for ids, labels in self.loader:
                loss = self.compute_loss(ids, labels)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    loader = DataLoader(make_examples(256, g), batch_size=16, shuffle=True, collate_fn=collate)
    print(f"final loss {SFTTrainer(TinyLM(), loader).train(epochs=4)}")


if __name__ == "__main__":
    main()
