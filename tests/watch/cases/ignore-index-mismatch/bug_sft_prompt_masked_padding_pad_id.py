"""Instruction tuning of a small causal LM with a hand-written collator: the prompt part of each
label row is set to -100, as the loss's ignore_index expects, but the rows are then right-padded
with the tokenizer's pad id (0) in the labels as well as in the input ids. The -100 convention covers
the prompt and not the padding, so every pad slot is a target and the loss is diluted by
"predict pad after pad"."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

VOCAB, PAD_ID, EOS_ID, SEP_ID = 48, 0, 1, 2


class TinyCausalLM(nn.Module):
    def __init__(self, dim=48):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, dim)
        self.gru = nn.GRU(dim, dim, batch_first=True)
        self.out = nn.Linear(dim, VOCAB)

    def forward(self, ids):
        return self.out(self.gru(self.tok(ids))[0])


def make_pairs(n, seed):
    """An instruction of 3-8 tokens, SEP, then its tokens reversed, then EOS."""
    g = torch.Generator().manual_seed(seed)
    pairs = []
    for _ in range(n):
        prompt = torch.randint(3, VOCAB, (int(torch.randint(3, 9, (1,), generator=g)),), generator=g).tolist()
        pairs.append((prompt + [SEP_ID], prompt[::-1] + [EOS_ID]))
    return pairs


class SFTCollator:
    def __init__(self, pad_id):
        self.pad_id = pad_id

    def __call__(self, pairs):
        rows = [(p + r, [-100] * len(p) + r) for p, r in pairs]
        width = max(len(ids) for ids, _ in rows)
        ids = [ids + [self.pad_id] * (width - len(ids)) for ids, _ in rows]
        labels = [lab + [self.pad_id] * (width - len(lab)) for _, lab in rows]
        return torch.tensor(ids), torch.tensor(labels)


def sft_step(model, optimizer, ids, labels):
    logits = model(ids)[:, :-1]
    loss = F.cross_entropy(logits.reshape(-1, VOCAB), labels[:, 1:].reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    model = TinyCausalLM()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    loader = DataLoader(make_pairs(1600, seed=0), batch_size=16, shuffle=True, collate_fn=SFTCollator(PAD_ID),
                        generator=torch.Generator().manual_seed(0))
    for epoch in range(1):
        for step, (ids, labels) in enumerate(loader):
            loss = sft_step(model, optimizer, ids, labels)
            if step % 25 == 0:
                print(f"step {step} loss {loss:.3f}")


if __name__ == "__main__":
    main()
