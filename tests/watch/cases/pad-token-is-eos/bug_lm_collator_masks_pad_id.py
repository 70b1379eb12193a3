"""Supervised fine-tuning of a small causal language model on short answers. The tokenizer has no
pad token, so it is set to the eos token, and each example ends with eos. The language-modeling
collator pads the batch to its longest example and builds the labels by copying input_ids and
setting every position equal to pad_token_id to -100: that masks each example's own eos as well,
so the model is never trained to end an answer."""
import torch
import torch.nn.functional as F
from torch import nn

LETTERS = "abcdefghijklmnopqrstuvwxyz ="


class Tokenizer:
    bos_token_id, eos_token_id, pad_token_id = 0, 1, None
    vocab_size = len(LETTERS) + 2

    def __call__(self, text):
        return [self.bos_token_id] + [LETTERS.index(c) + 2 for c in text] + [self.eos_token_id]


class LMCollator:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def __call__(self, examples):
        width = max(len(e) for e in examples)
        input_ids = torch.full((len(examples), width), self.tokenizer.pad_token_id)
        for i, e in enumerate(examples):
            input_ids[i, :len(e)] = torch.tensor(e)
        labels = input_ids.clone()
        labels[labels == self.tokenizer.pad_token_id] = -100
        return input_ids, labels


class CausalLM(nn.Module):
    def __init__(self, vocab, dim=64):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.lm_head = nn.Linear(dim, vocab)

    def forward(self, input_ids, labels):
        logits = self.lm_head(self.rnn(self.embed_tokens(input_ids))[0])
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1))


def examples(n, g):
    out = []
    for _ in range(n):
        word = "".join(LETTERS[i] for i in torch.randint(0, 26, (int(torch.randint(2, 9, (1,), generator=g)),),
                                                         generator=g).tolist())
        out.append(f"{word} = {word[::-1]}")
    return out


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    tokenizer = Tokenizer()
    tokenizer.pad_token_id = tokenizer.eos_token_id
    data = [tokenizer(t) for t in examples(1500, g)]
    collator, model = LMCollator(tokenizer), CausalLM(tokenizer.vocab_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for step in range(60):
        input_ids, labels = collator([data[int(i)] for i in torch.randint(0, len(data), (32,), generator=g)])
        loss = model(input_ids, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
