"""A speaker-embedding recipe: a bunch object carries train_loader and train_sampler (a
DistributedSampler when the job is distributed), and a SimpleTrainer class runs
epochs in run(), calling train_one_batch() for each batch of a TDNN x-vector model with a softmax
speaker classifier. Nothing calls data.train_sampler.set_epoch(this_epoch) at the start of an
epoch, so the sampler reuses one permutation for every epoch.

Thread: https://github.com/Snowdar/asv-subtools/issues/8
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class Bunch:
    def __init__(self, train_loader, train_sampler):
        self.train_loader, self.train_sampler = train_loader, train_sampler


def get_bunch(dataset, batch_size, world_size, rank):
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True) \
        if world_size > 1 else None
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=(sampler is None), sampler=sampler,
                        drop_last=True)
    return Bunch(loader, sampler)


class Xvector(nn.Module):
    def __init__(self, feat_dim=20, channels=64, embd_dim=32, num_speakers=16):
        super().__init__()
        self.tdnn1 = nn.Conv1d(feat_dim, channels, 5, dilation=1)
        self.tdnn2 = nn.Conv1d(channels, channels, 3, dilation=2)
        self.tdnn3 = nn.Conv1d(channels, channels, 1)
        self.bn = nn.BatchNorm1d(channels * 2)
        self.embedding = nn.Linear(channels * 2, embd_dim)
        self.classifier = nn.Linear(embd_dim, num_speakers)

    def forward(self, feats):
        x = F.relu(self.tdnn1(feats))
        x = F.relu(self.tdnn2(x))
        x = F.relu(self.tdnn3(x))
        stats = torch.cat([x.mean(dim=2), x.std(dim=2)], dim=1)
        return self.classifier(F.relu(self.embedding(self.bn(stats))))


class SimpleTrainer:
    def __init__(self, model, data, optimizer, epochs):
        self.model, self.data, self.optimizer, self.epochs = model, data, optimizer, epochs
        self.training_point = 0

    def train_one_batch(self, batch):
        feats, targets = batch
        loss = F.cross_entropy(self.model(feats), targets)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def run(self):
        for this_epoch in range(self.epochs):
            self.model.train()
            first_utts = list(iter(self.data.train_sampler))[:6] if self.data.train_sampler else []
            losses = []
            for batch in self.data.train_loader:
                losses.append(self.train_one_batch(batch))
                self.training_point += 1
            print(f"epoch {this_epoch}: mean loss {sum(losses) / len(losses):.4f} over {len(losses)} batches, "
                  f"first utterances {first_utts}")


def speaker_feats(n_utts=1200, num_speakers=16, frames=40, feat_dim=20, seed=0):
    g = torch.Generator().manual_seed(seed)
    centroids = torch.randn(num_speakers, feat_dim, generator=torch.Generator().manual_seed(3))
    spk = torch.randint(0, num_speakers, (n_utts,), generator=g)
    feats = centroids[spk][:, :, None] * 0.25 + torch.randn(n_utts, feat_dim, frames, generator=g)
    return TensorDataset(feats, spk)


def main():
    torch.manual_seed(0)
    data = get_bunch(speaker_feats(), batch_size=32, world_size=2, rank=0)
    model = Xvector()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    SimpleTrainer(model, data, optimizer, epochs=4).run()


if __name__ == "__main__":
    main()
