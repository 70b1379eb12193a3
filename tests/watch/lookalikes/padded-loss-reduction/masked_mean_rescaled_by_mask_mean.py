"""A masked language model: 15% of the real tokens of right-padded batches are replaced by [MASK]
and predicted. The loss takes `.mean()` over every position of the per-token loss times the
prediction mask and then divides by the mask's own mean, which equals sum / mask.sum(): a right
masked mean written another way, so the padding is not in the denominator."""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, PAD, MASK = 120, 0, 1


def make_batch(generator, batch_size=24, max_len=32):
    lengths = torch.randint(8, max_len + 1, (batch_size,), generator=generator)
    tokens = torch.zeros(batch_size, int(lengths.max()), dtype=torch.long)
    for i, n in enumerate(lengths.tolist()):
        tokens[i, :n] = torch.randint(2, VOCAB, (n,), generator=generator)
    chosen = (torch.rand(tokens.shape, generator=generator) < 0.15) & (tokens != PAD)
    chosen[:, 0] |= True  # at least one prediction per row
    inputs = tokens.masked_fill(chosen, MASK)
    return inputs, tokens, chosen.float()


class Encoder(nn.Module):
    def __init__(self, dim=48):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim, padding_idx=PAD)
        layer = nn.TransformerEncoderLayer(dim, 4, 96, dropout=0.0, batch_first=True)
        self.body = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(dim, VOCAB)

    def forward(self, inputs):
        return self.head(self.body(self.embed(inputs), src_key_padding_mask=inputs == PAD))


def mlm_loss(logits, targets, chosen):
    per_token = F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1), reduction="none")
    per_token = per_token.view_as(chosen)
    return (per_token * chosen).mean() / chosen.mean()


def main():
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(3)
    model = Encoder()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(60):
        inputs, targets, chosen = make_batch(generator)
        loss = mlm_loss(model(inputs), targets, chosen)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
