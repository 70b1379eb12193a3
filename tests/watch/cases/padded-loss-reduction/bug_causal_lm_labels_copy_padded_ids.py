"""Fine-tuning a small causal language model in the Hugging Face style: the tokenizer pads each batch
on the right with pad_token_id = 0 and returns an attention mask, the training loop passes
labels=input_ids (the model shifts them inside forward and uses ignore_index=-100), but nothing sets
the labels of the padded positions to -100, so the model is trained to predict pad after pad."""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, PAD_ID, EOS_ID = 50, 0, 1


class TinyTokenizer:
    pad_token_id = PAD_ID

    def __call__(self, sequences):
        width = max(len(s) for s in sequences)
        input_ids = torch.full((len(sequences), width), self.pad_token_id)
        attention_mask = torch.zeros(len(sequences), width, dtype=torch.long)
        for i, s in enumerate(sequences):
            input_ids[i, :len(s)] = torch.tensor(s)
            attention_mask[i, :len(s)] = 1
        return {"input_ids": input_ids, "attention_mask": attention_mask}


class TinyCausalLM(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, dim)
        self.rnn = nn.LSTM(dim, dim, batch_first=True)
        self.lm_head = nn.Linear(dim, VOCAB)

    def forward(self, input_ids, attention_mask=None, labels=None):
        logits = self.lm_head(self.rnn(self.wte(input_ids))[0])
        loss = None
        if labels is not None:
            shift_logits, shift_labels = logits[:, :-1], labels[:, 1:]
            loss = F.cross_entropy(shift_logits.reshape(-1, VOCAB), shift_labels.reshape(-1), ignore_index=-100)
        return loss, logits


def corpus(n, g):
    """Counting sequences: a start token, then +1 steps (mod 48), then EOS."""
    out = []
    for _ in range(n):
        start = int(torch.randint(2, VOCAB, (1,), generator=g))
        length = int(torch.randint(4, 16, (1,), generator=g))
        out.append([2 + (start + k) % (VOCAB - 2) for k in range(length)] + [EOS_ID])
    return out


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    texts, tokenizer, model = corpus(2000, g), TinyTokenizer(), TinyCausalLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for step in range(60):
        batch = tokenizer([texts[int(i)] for i in torch.randint(0, len(texts), (24,), generator=g)])
        labels = batch["input_ids"].clone()
        loss, _ = model(**batch, labels=labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
