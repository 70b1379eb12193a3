"""Healthy look-alike of pad-token-is-eos: pad_token = eos_token as in many fine-tuning scripts, and
every example ends with eos, but the batch is padded to its longest example and the labels are
masked with the attention mask, by position: the first eos of each row, the one that ends the text,
stays a target, and only the copies after it are ignored."""
import torch
from torch import nn
from torch.utils.data import DataLoader

EOS, VOCAB = 1, 32


def pad_batch(batch, pad_token_id=EOS):
    width = max(len(x) for x in batch)
    input_ids = torch.full((len(batch), width), pad_token_id)
    attention_mask = torch.zeros(len(batch), width, dtype=torch.long)
    for i, x in enumerate(batch):
        input_ids[i, :len(x)] = torch.tensor(x)
        attention_mask[i, :len(x)] = 1
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    return input_ids, labels


class TinyLM(nn.Module):
    def __init__(self, dim=48):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, dim)
        self.lstm = nn.LSTM(dim, dim, batch_first=True)
        self.proj = nn.Linear(dim, VOCAB)

    def forward(self, ids):
        return self.proj(self.lstm(self.emb(ids))[0])


def texts(n, g):
    out = []
    for _ in range(n):
        k = int(torch.randint(3, 12, (1,), generator=g))
        first = int(torch.randint(2, VOCAB, (1,), generator=g))
        out.append([2 + (first + j) % (VOCAB - 2) for j in range(k)] + [EOS])
    return out


def main():
    torch.manual_seed(0)
    loader = DataLoader(texts(1600, torch.Generator().manual_seed(0)), batch_size=32, shuffle=True,
                        collate_fn=pad_batch, generator=torch.Generator().manual_seed(1))
    model = TinyLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(2):
        for input_ids, labels in loader:
            logits = model(input_ids)
            loss = loss_fn(logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
