"""A set-prediction head in the DETR layout: a small CNN's feature map is flattened to
(positions, batch, dim), ten learned object queries are expanded to (queries, batch, dim), and an
nn.MultiheadAttention left at batch_first=False lets the queries attend to the positions of their
own image. Time-major on purpose, and right: the batch is on axis 1 everywhere."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

QUERIES, DIM = 10, 32


class QueryHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, DIM, 3, stride=2, padding=1), nn.ReLU(),
                                      nn.Conv2d(DIM, DIM, 3, stride=2, padding=1))
        self.queries = nn.Parameter(torch.randn(QUERIES, 1, DIM) * 0.1)
        self.attn = nn.MultiheadAttention(DIM, num_heads=4)
        self.count = nn.Linear(DIM, 1)

    def forward(self, images):
        memory = self.backbone(images).flatten(2).permute(2, 0, 1)        # (HW, B, D)
        q = self.queries.expand(-1, images.shape[0], -1)                   # (Q, B, D)
        out, _ = self.attn(q, memory, memory)
        return self.count(out).squeeze(-1).sum(0)                          # (B,)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    images = torch.rand(512, 3, 16, 16, generator=g)
    counts = (images[:, 0] > 0.9).float().sum((1, 2)) / 10
    loader = DataLoader(TensorDataset(images, counts), batch_size=16, shuffle=True)
    model = QueryHead()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for epoch in range(2):
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.smooth_l1_loss(model(x), y)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
