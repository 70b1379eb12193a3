"""A SimCLR pretraining script laid out like a popular PyTorch SimCLR repository: a
TransformsSimCLR that returns two augmented views, a SimCLR(args, encoder, n_features) module
returning (h_i, h_j, z_i, z_j), an NT_Xent(batch_size, temperature, device, world_size) loss over
the views gathered from all ranks, a train(args, train_loader, model, criterion, optimizer,
writer) helper with zero_grad/backward/step per batch, and a main() that, for multi-node runs,
builds a DistributedSampler(shuffle=True) per rank and hands it to the DataLoader with
shuffle=False. The epoch loop never calls train_sampler.set_epoch(epoch). DistributedSampler
seeds its permutation with seed + epoch, so without set_epoch every epoch replays exactly the
same permutation: each rank sees the same samples in the same order and every step of every
epoch contrasts the same group of images against each other, so the negatives the loss sees never
change from epoch to epoch. Two ranks are simulated in one process here (the all_gather becomes a
concatenation of the two ranks' batches).

Thread: https://github.com/Spijkervet/SimCLR/pull/26
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

N_CLASSES, DIM = 32, 32


class TransformsSimCLR:
    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    def _one(self, x):
        content = x[: DIM // 2] * (0.8 + 0.4 * torch.rand(1, generator=self.g))
        content = content + 0.3 * torch.randn(DIM // 2, generator=self.g)
        style = 3.0 * torch.randn(DIM // 2, generator=self.g)
        return torch.cat([content, style])

    def __call__(self, x):
        return self._one(x), self._one(x)


class UnlabelledImages(Dataset):
    def __init__(self, n, seed, transform=None):
        gp = torch.Generator().manual_seed(11)
        protos = torch.randn(N_CLASSES, DIM // 2, generator=gp)
        g = torch.Generator().manual_seed(seed)
        self.targets = torch.randint(0, N_CLASSES, (n,), generator=g)
        content = protos[self.targets] + 0.5 * torch.randn(n, DIM // 2, generator=g)
        self.data = torch.cat([content, 3.0 * torch.randn(n, DIM // 2, generator=g)], dim=1)
        self.transform = transform

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, i):
        x = self.data[i]
        return (self.transform(x) if self.transform else x), self.targets[i]


def get_resnet():
    return nn.Sequential(nn.Linear(DIM, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU())


class SimCLR(nn.Module):
    def __init__(self, args, encoder, n_features):
        super().__init__()
        self.encoder = encoder
        self.n_features = n_features
        self.projector = nn.Sequential(nn.Linear(n_features, n_features, bias=False), nn.ReLU(),
                                       nn.Linear(n_features, args.projection_dim, bias=False))

    def forward(self, x_i, x_j):
        h_i, h_j = self.encoder(x_i), self.encoder(x_j)
        return h_i, h_j, self.projector(h_i), self.projector(h_j)


class NT_Xent(nn.Module):
    def __init__(self, batch_size, temperature, device, world_size):
        super().__init__()
        self.batch_size = batch_size
        self.temperature = temperature
        self.world_size = world_size
        self.mask = self.mask_correlated_samples(batch_size, world_size)
        self.criterion = nn.CrossEntropyLoss(reduction="sum")
        self.similarity_f = nn.CosineSimilarity(dim=2)

    def mask_correlated_samples(self, batch_size, world_size):
        N = 2 * batch_size * world_size
        mask = torch.ones((N, N), dtype=bool)
        mask = mask.fill_diagonal_(0)
        for i in range(batch_size * world_size):
            mask[i, batch_size * world_size + i] = 0
            mask[batch_size * world_size + i, i] = 0
        return mask

    def forward(self, z_i, z_j):
        N = 2 * self.batch_size * self.world_size
        z = torch.cat((z_i, z_j), dim=0)   # z_i, z_j already hold the batches of every rank
        sim = self.similarity_f(z.unsqueeze(1), z.unsqueeze(0)) / self.temperature
        half = self.batch_size * self.world_size
        positive_samples = torch.cat((torch.diag(sim, half), torch.diag(sim, -half)), dim=0).reshape(N, 1)
        negative_samples = sim[self.mask].reshape(N, -1)
        labels = torch.zeros(N, dtype=torch.long)
        logits = torch.cat((positive_samples, negative_samples), dim=1)
        return self.criterion(logits, labels) / N


class GatheredLoaders:
    """One DataLoader per simulated rank; each step yields what all_gather would assemble."""

    def __init__(self, loaders):
        self.loaders = loaders

    def __len__(self):
        return min(len(l) for l in self.loaders)

    def __iter__(self):
        for per_rank in zip(*self.loaders):
            x_i = torch.cat([b[0][0] for b in per_rank])
            x_j = torch.cat([b[0][1] for b in per_rank])
            y = torch.cat([b[1] for b in per_rank])
            yield (x_i, x_j), y


def train(args, train_loader, model, criterion, optimizer, writer):
    loss_epoch = 0
    for step, ((x_i, x_j), _) in enumerate(train_loader):
        optimizer.zero_grad()
        h_i, h_j, z_i, z_j = model(x_i, x_j)
        loss = criterion(z_i, z_j)
        loss.backward()
        optimizer.step()
        args.global_step += 1
        loss_epoch += loss.item()
    return loss_epoch


@torch.no_grad()
def knn_accuracy(encoder, train_set, test_set, k=10):
    f_tr = F.normalize(encoder(train_set.data), dim=1)
    f_te = F.normalize(encoder(test_set.data), dim=1)
    idx = (f_te @ f_tr.T).topk(k, dim=1).indices
    votes = F.one_hot(train_set.targets[idx], N_CLASSES).sum(1)
    return (votes.argmax(1) == test_set.targets).float().mean().item()


def main(gpu, args):
    torch.manual_seed(args.seed)
    train_dataset = UnlabelledImages(1024, seed=1, transform=TransformsSimCLR(seed=5))
    loaders, samplers = [], []
    for rank in range(args.world_size):
        if args.nodes > 1:
            train_sampler = DistributedSampler(train_dataset, num_replicas=args.world_size, rank=rank, shuffle=True)
        else:
            train_sampler = None
        samplers.append(train_sampler)
        loaders.append(DataLoader(train_dataset, batch_size=args.batch_size, shuffle=(train_sampler is None),
                                  drop_last=True, num_workers=0, sampler=train_sampler))
    train_loader = GatheredLoaders(loaders)

    encoder = get_resnet()
    model = SimCLR(args, encoder, n_features=64)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)
    criterion = NT_Xent(args.batch_size, args.temperature, "cpu", args.world_size)

    probe_train, probe_test = UnlabelledImages(1024, seed=1), UnlabelledImages(1024, seed=2)
    args.global_step = 0
    for epoch in range(args.start_epoch, args.epochs):
        lr = optimizer.param_groups[0]["lr"]
        loss_epoch = train(args, train_loader, model, criterion, optimizer, None)
        if epoch % 3 == 2 or epoch == args.epochs - 1:
            print(f"Epoch [{epoch}/{args.epochs}]\t Loss: {loss_epoch / len(train_loader):.4f}\t lr: {round(lr, 5)}"
                  f"\t kNN acc: {knn_accuracy(model.encoder, probe_train, probe_test):.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="SimCLR")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--temperature", type=float, default=0.5)
    parser.add_argument("--projection_dim", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--start_epoch", type=int, default=0)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--gpus", type=int, default=1)
    args = parser.parse_args([])
    args.world_size = args.gpus * args.nodes
    main(0, args)
