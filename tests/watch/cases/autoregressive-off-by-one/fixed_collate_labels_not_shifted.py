"""Fixed twin of bug_collate_labels_not_shifted: compute_loss scores the logits of positions
0..T-2 against the labels of positions 1..T-1, so each position predicts the next token."""
import torch
from torch import nn
from torch.utils.data import DataLoader

VOCAB, PAD, BOS = 48, 0, 1


class RecurrentLM(nn.Module):
    def __init__(self, vocab=VOCAB, dim=48):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, padding_idx=PAD)
        self.rnn = nn.LSTM(dim, dim, batch_first=True)
        self.lm_head = nn.Linear(dim, vocab)

    def forward(self, input_ids):
        hidden, _ = self.rnn(self.embed(input_ids))
        return self.lm_head(hidden)


def make_pairs(n, g):
    pairs = []
    for _ in range(n):
        prompt = [BOS] + torch.randint(2, VOCAB, (int(torch.randint(4, 9, (1,), generator=g)),), generator=g).tolist()
        response = sorted(prompt[1:])  # the task: answer with the prompt's tokens in order
        pairs.append((prompt, response))
    return pairs


def collate(batch):
    width = max(len(p) + len(r) for p, r in batch)
    input_ids = torch.full((len(batch), width), PAD)
    labels = torch.full((len(batch), width), -100)
    for row, (prompt, response) in enumerate(batch):
        ids = torch.tensor(prompt + response)
        input_ids[row, :len(ids)] = ids
        labels[row, :len(ids)] = ids
        labels[row, :len(prompt)] = -100
    return {"input_ids": input_ids, "labels": labels}


class Trainer:
    def __init__(self, model, dataset, lr=3e-3):
        self.model = model
        self.loader = DataLoader(dataset, batch_size=16, shuffle=True, collate_fn=collate)
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.criterion = nn.CrossEntropyLoss(ignore_index=-100)

    def compute_loss(self, batch):
        logits = self.model(batch["input_ids"])[:, :-1]
        return self.criterion(logits.reshape(-1, VOCAB), batch["labels"][:, 1:].reshape(-1))

    def train(self, epochs):
        self.model.train()
        for _ in range(epochs):
            for batch in self.loader:
                loss = self.compute_loss(batch)
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()
        return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    trainer = Trainer(RecurrentLM(), make_pairs(320, g))
    print(f"final loss {trainer.train(epochs=3):.4f}")


if __name__ == "__main__":
    main()
