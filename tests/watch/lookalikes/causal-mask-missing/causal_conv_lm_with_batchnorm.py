"""A WaveNet-style next-token model: embeddings, then dilated Conv1d layers padded on the left only
(each output sees its own and earlier positions), each followed by BatchNorm1d in training mode,
then a 1x1 head; the loss scores position t on id t+1. The model is causal. BatchNorm's batch
statistics pool over all positions, so later positions get a gradient, but one that is orders of
magnitude smaller than the earlier positions' (the check's LEAK threshold)."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB, SEQ, CH = 32, 48, 32


class CausalConvLM(nn.Module):
    def __init__(self, layers=3):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, CH)
        self.convs = nn.ModuleList(nn.Conv1d(CH, CH, kernel_size=2, dilation=2 ** i) for i in range(layers))
        self.norms = nn.ModuleList(nn.BatchNorm1d(CH) for _ in range(layers))
        self.head = nn.Conv1d(CH, VOCAB, 1)

    def forward(self, ids):
        h = self.embed(ids).transpose(1, 2)                        # (B, C, T)
        for conv, norm in zip(self.convs, self.norms):
            pad = conv.dilation[0] * (conv.kernel_size[0] - 1)
            h = h + torch.relu(norm(conv(F.pad(h, (pad, 0)))))
        return self.head(h).transpose(1, 2)                        # (B, T, V)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    start = torch.randint(0, VOCAB, (4096, 1), generator=g)
    ids = (start + 3 * torch.arange(SEQ + 1)) % VOCAB
    loader = DataLoader(TensorDataset(ids), batch_size=64, shuffle=True)
    model = CausalConvLM()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    for epoch in range(1):
        for (seq,) in loader:
            logits = model(seq[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), seq[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
