"""A CLIP-style contrastive loss written by hand: image and text embeddings of a batch give an
(N, N) similarity matrix, and the loss averages log_softmax over dim=1 (each image against every
text) and over dim=0 (each text against every image), read on the diagonal. Normalising over the
batch is the contrastive objective itself: both axes of the matrix are the batch."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class TwoTower(nn.Module):
    def __init__(self, image_dim=24, text_dim=16, dim=32):
        super().__init__()
        self.image = nn.Sequential(nn.Linear(image_dim, 64), nn.ReLU(), nn.Linear(64, dim))
        self.text = nn.Sequential(nn.Linear(text_dim, 64), nn.ReLU(), nn.Linear(64, dim))
        self.log_scale = nn.Parameter(torch.tensor(2.0))

    def forward(self, images, texts):
        a = F.normalize(self.image(images), dim=-1)
        b = F.normalize(self.text(texts), dim=-1)
        return self.log_scale.exp() * a @ b.t()


def symmetric_loss(similarity):
    per_image = F.log_softmax(similarity, dim=1).diagonal()
    per_text = F.log_softmax(similarity, dim=0).diagonal()
    return -(per_image.mean() + per_text.mean()) / 2


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    shared = torch.randn(1024, 8, generator=g)
    images = torch.cat([shared, torch.randn(1024, 16, generator=g)], 1)
    texts = torch.cat([shared, 0.5 * torch.randn(1024, 8, generator=g)], 1)
    loader = DataLoader(TensorDataset(images, texts), batch_size=64, shuffle=True, generator=g)
    model = TwoTower()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for epoch in range(3):
        for x, t in loader:
            loss = symmetric_loss(model(x, t))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
