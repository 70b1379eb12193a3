"""Multi-turn chat fine-tuning with a trainer class: each conversation is a list of (role, tokens)
turns; the collator concatenates them and copies the ids to the labels; the fix writes -100, the
loss's ignore_index, into the labels of every user turn and of the padding (the ids are still padded
with the pad id), so only the assistant's replies are targets."""
import torch
from torch import nn

VOCAB, PAD_ID, BOT, EOT = 60, 0, 1, 2


def conversations(n, seed):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        turns = []
        for _ in range(int(torch.randint(1, 3, (1,), generator=g))):
            user = torch.randint(3, VOCAB, (int(torch.randint(4, 9, (1,), generator=g)),), generator=g).tolist()
            reply = [3 + (u * 5) % (VOCAB - 3) for u in user[:4]] + [EOT]
            turns += [("user", [BOT] + user), ("assistant", reply)]
        out.append(turns)
    return out


class ChatCollator:
    def __init__(self, pad_id):
        self.pad_id = pad_id

    def __call__(self, batch):
        ids, labels = [], []
        for turns in batch:
            row, lab = [], []
            for role, tokens in turns:
                row += tokens
                lab += tokens if role == "assistant" else [-100] * len(tokens)
            ids.append(row)
            labels.append(lab)
        width = max(map(len, ids))
        pad = lambda rows, value: torch.tensor([r + [value] * (width - len(r)) for r in rows])  # noqa: E731
        return pad(ids, self.pad_id), pad(labels, -100)


class ChatLM(nn.Module):
    def __init__(self, dim=48):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, dim)
        self.rnn = nn.LSTM(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, VOCAB)

    def forward(self, ids):
        return self.head(self.rnn(self.wte(ids))[0])


class ChatTrainer:
    def __init__(self, model, data, collator):
        self.model, self.data, self.collator = model, data, collator
        self.loss_fn = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

    def training_step(self, ids, labels):
        logits = self.model(ids)[:, :-1]
        return self.loss_fn(logits.reshape(-1, VOCAB), labels[:, 1:].reshape(-1))

    def train(self, batch_size=12):
        g = torch.Generator().manual_seed(0)
        order = torch.randperm(len(self.data), generator=g).tolist()
        for start in range(0, len(order) - batch_size + 1, batch_size):
            ids, labels = self.collator([self.data[i] for i in order[start:start + batch_size]])
            loss = self.training_step(ids, labels)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    print(f"last loss {ChatTrainer(ChatLM(), conversations(900, seed=0), ChatCollator(PAD_ID)).train():.3f}")


if __name__ == "__main__":
    main()
