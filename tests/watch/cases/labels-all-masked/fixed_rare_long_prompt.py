"""Supervised fine-tuning with one conversation per step (the per-device batch of a large model).
A sample is [BOS, prompt (masked to -100), response, EOS]. One prompt in ten is long enough to fill
MAX_LEN alone; the fix cuts the prompt from the left so that the response and EOS always fit, and
every sample keeps its labels."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

VOCAB, MAX_LEN, BOS, EOS = 64, 24, 1, 2


class TinyLM(nn.Module):
    def __init__(self, vocab=VOCAB, dim=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.mix = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, vocab)

    def forward(self, ids):
        return self.head(self.mix(self.embed(ids))[0])


class ChatDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.items = []
        for i in range(n):
            length = 30 if i % 10 == 3 else int(torch.randint(4, 12, (1,), generator=g))
            prompt = torch.randint(3, VOCAB, (length,), generator=g).tolist()
            response = torch.randint(3, VOCAB, (6,), generator=g).tolist()
            self.items.append((prompt, response))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        prompt, response = self.items[idx]
        prompt = prompt[-(MAX_LEN - len(response) - 2):]
        input_ids = [BOS] + prompt + response + [EOS]
        labels = [-100] * (1 + len(prompt)) + response + [EOS]
        return torch.tensor(input_ids[:MAX_LEN]), torch.tensor(labels[:MAX_LEN])


def train(model, loader, optimizer, epochs):
    for _ in range(epochs):
        for ids, labels in loader:
            logits = model(ids)[:, :-1]
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), labels[:, 1:].reshape(-1), ignore_index=-100)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    model = TinyLM()
    loader = DataLoader(ChatDataset(200, seed=0), batch_size=1, shuffle=True,
                        generator=torch.Generator().manual_seed(16))
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    print(f"last loss {train(model, loader, optimizer, epochs=1)}")


if __name__ == "__main__":
    main()
