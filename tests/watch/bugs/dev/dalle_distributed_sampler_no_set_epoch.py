"""A train_dalle-style script: a distributed-backend object gives world size and rank, the data
loader gets a DistributedSampler when the backend is distributed (shuffle left to the sampler),
and the epoch loop runs forward with return_loss=True, backward, gradient clipping and step. The
sampler's set_epoch() is never called, so every epoch draws the same permutation: this rank sees
the same shard in the same order with the same batch boundaries for the whole run.

Thread: https://github.com/lucidrains/DALLE-pytorch/pull/230
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class SimulatedBackend:
    """Stands in for the launcher: this process plays rank 0 of a two-process job."""

    def __init__(self, world_size=2, rank=0):
        self.world_size, self.rank = world_size, rank

    def get_world_size(self):
        return self.world_size

    def get_rank(self):
        return self.rank

    def is_root_worker(self):
        return self.rank == 0


class TextImageDataset(Dataset):
    def __init__(self, n, text_len=8, image_tokens=16, num_text_tokens=50, num_image_tokens=32, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.text = torch.randint(1, num_text_tokens, (n, text_len), generator=g)
        table = torch.randint(0, num_image_tokens, (num_text_tokens, image_tokens),
                              generator=torch.Generator().manual_seed(5))
        noise = torch.randint(0, num_image_tokens, (n, image_tokens), generator=g)
        keep = torch.rand(n, image_tokens, generator=g) < 0.8
        self.images = torch.where(keep, table[self.text[:, 0]], noise)

    def __len__(self):
        return len(self.text)

    def __getitem__(self, idx):
        return self.text[idx], self.images[idx]


class TinyDALLE(nn.Module):
    def __init__(self, num_text_tokens=50, num_image_tokens=32, image_tokens=16, dim=64):
        super().__init__()
        self.text_emb = nn.Embedding(num_text_tokens, dim)
        self.image_pos = nn.Parameter(torch.randn(image_tokens, dim) * 0.02)
        self.body = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim), nn.GELU())
        self.to_logits = nn.Linear(dim, num_image_tokens)

    def forward(self, text, images, return_loss=False):
        context = self.text_emb(text[:, :1]) + 0.1 * self.text_emb(text).mean(dim=1, keepdim=True)
        h = self.body(context + self.image_pos)
        logits = self.to_logits(h)
        if not return_loss:
            return logits
        return F.cross_entropy(logits.transpose(1, 2), images)


def main():
    torch.manual_seed(0)
    distr_backend = SimulatedBackend()
    using_deepspeed = False
    ds = TextImageDataset(2048)
    is_distributed = distr_backend.get_world_size() > 1
    data_sampler = DistributedSampler(ds, num_replicas=distr_backend.get_world_size(),
                                      rank=distr_backend.get_rank()) if is_distributed else None
    dl = DataLoader(ds, batch_size=32, shuffle=not data_sampler, drop_last=True, sampler=data_sampler)
    dalle = TinyDALLE()
    opt = torch.optim.Adam(dalle.parameters(), lr=2e-3)
    for epoch in range(4):
        order = list(iter(data_sampler))[:6]
        for i, (text, images) in enumerate(dl):
            loss = dalle(text, images, return_loss=True)
            if not using_deepspeed:
                loss.backward()
            nn.utils.clip_grad_norm_(dalle.parameters(), 0.5)
            opt.step()
            opt.zero_grad()
            if i % 16 == 0 and distr_backend.is_root_worker():
                print(f"epoch {epoch} step {i} loss {loss.item():.4f}")
        print(f"epoch {epoch} done, first sample indices this epoch: {order}")


if __name__ == "__main__":
    main()
