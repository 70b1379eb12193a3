"""Healthy look-alike of autoregressive-off-by-one: a causal language model called the Hugging Face
way, model(input_ids, labels=input_ids). The labels are a copy of the inputs, as they should be for
such a model, because its forward shifts them itself: logits[:, :-1] against labels[:, 1:]."""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, LENGTH = 50, 20


class CausalLM(nn.Module):
    def __init__(self, vocab=VOCAB, dim=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.lm_head = nn.Linear(dim, vocab)

    def forward(self, input_ids, labels=None):
        logits = self.lm_head(self.rnn(self.embed(input_ids))[0])
        loss = None
        if labels is not None:
            shift_logits = logits[:, :-1].contiguous()
            shift_labels = labels[:, 1:].contiguous()
            loss = F.cross_entropy(shift_logits.view(-1, VOCAB), shift_labels.view(-1))
        return loss, logits


def main():
    torch.manual_seed(0)
    model = CausalLM()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for step in range(60):
        start = torch.randint(0, VOCAB, (16, 1))
        input_ids = (start + torch.arange(LENGTH)) % VOCAB  # counting sequences: learnable
        loss, _ = model(input_ids, labels=input_ids)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
