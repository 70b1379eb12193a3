"""Instruction tuning in the shape of a recipe's dataset class: __getitem__ encodes prompt and
prompt + answer + EOS, pads the example to MAX_WORDS with -1, copies it to the labels and marks the
prompt part of the labels with -1; the fix writes 0 into the example's padding but -100, the loss's
ignore_index, into the labels' masked positions, so neither the prompt nor the padding is a target."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

VOCAB, MAX_WORDS, EOS = 40, 24, 2


class InstructionDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.pairs = []
        for _ in range(n):
            prompt = torch.randint(3, VOCAB, (int(torch.randint(6, 12, (1,), generator=g)),), generator=g).tolist()
            self.pairs.append((prompt, [3 + (t * 7) % (VOCAB - 3) for t in prompt[:5]]))

    def __len__(self):
        return len(self.pairs)

    def __getitem__(self, i):
        prompt, answer = self.pairs[i]
        example = torch.tensor(prompt + answer + [EOS])
        example = torch.cat([example, torch.full((MAX_WORDS - len(example),), -1)])
        labels = example.clone()
        labels[:len(prompt)] = -1
        example_mask, label_mask = example.ge(0), labels.ge(0)
        example[~example_mask] = 0
        labels[~label_mask] = -100
        return {"input_ids": example, "labels": labels, "attention_mask": example_mask.long()}


class TinyCausalLM(nn.Module):
    def __init__(self, dim=48):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, dim)
        self.gru = nn.GRU(dim, dim, batch_first=True)
        self.lm_head = nn.Linear(dim, VOCAB)

    def forward(self, input_ids, attention_mask=None, labels=None):
        logits = self.lm_head(self.gru(self.embed_tokens(input_ids))[0])
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1))
        return loss, logits


def train(model, loader, optimizer, epochs):
    model.train()
    for epoch in range(epochs):
        for batch in loader:
            loss, _ = model(**batch)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        print(f"epoch {epoch} loss {loss.item():.3f}")


def main():
    torch.manual_seed(0)
    loader = DataLoader(InstructionDataset(800, seed=0), batch_size=16, shuffle=True,
                        generator=torch.Generator().manual_seed(0))
    model = TinyCausalLM()
    train(model, loader, torch.optim.AdamW(model.parameters(), lr=3e-3), epochs=1)


if __name__ == "__main__":
    main()
