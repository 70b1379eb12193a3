"""A federated-learning benchmark: a CIFAR-style dataset class that stores the raw uint8 images as a
float tensor (values 0..255), a server whose get_dataset_transforms() builds Normalize(mean, std)
with the usual CIFAR-10 statistics for images in [0, 1], and FedAvg clients that load the global
weights, run local SGD epochs and send their weights back. Nothing divides the pixels by 255 before
Normalize, so every client trains on inputs ranging from about -2.5 to about 1260.

Thread: https://github.com/KarhouTam/FL-bench/issues/88
"""
from copy import deepcopy

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset, Subset

DATA_MEAN = {"cifar10": [0.4914, 0.4822, 0.4465]}
DATA_STD = {"cifar10": [0.2023, 0.1994, 0.2010]}


class CIFAR10Like(Dataset):
    def __init__(self, n, seed, data_transform=None):
        g = torch.Generator().manual_seed(seed)
        self.targets = torch.randint(0, 10, (n,), generator=g)
        protos = torch.randint(0, 256, (10, 12, 12, 3), generator=torch.Generator().manual_seed(99))
        noise = torch.randint(-60, 61, (n, 12, 12, 3), generator=g)
        raw = (protos[self.targets] + noise).clamp(0, 255).to(torch.uint8)  # HWC uint8, like .data
        self.data = torch.Tensor(raw.numpy()).permute([0, -1, 1, 2]).float()
        self.data_transform = data_transform

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, i):
        x = self.data[i]
        return (self.data_transform(x) if self.data_transform else x), self.targets[i]


def get_dataset_transforms(dataset="cifar10"):
    mean = torch.tensor(DATA_MEAN[dataset]).view(3, 1, 1)
    std = torch.tensor(DATA_STD[dataset]).view(3, 1, 1)
    return lambda x: (x - mean) / std  # transforms.Normalize(mean, std)


class AvgCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(3, 16, 3, padding=1), nn.Conv2d(16, 32, 3, padding=1)
        self.fc1, self.fc2 = nn.Linear(32 * 3 * 3, 64), nn.Linear(64, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


class FedAvgClient:
    def __init__(self, model, dataset, partition, local_epoch=2, batch_size=32):
        self.model, self.dataset, self.partition = model, dataset, partition
        self.local_epoch, self.batch_size = local_epoch, batch_size
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.init_optimizer_state = deepcopy(self.optimizer.state_dict())

    def set_parameters(self, package):
        self.optimizer.load_state_dict(self.init_optimizer_state)
        self.model.load_state_dict(package["regular_model_params"])
        self.trainloader = DataLoader(Subset(self.dataset, self.partition[package["client_id"]]),
                                      batch_size=self.batch_size, shuffle=True,
                                      generator=torch.Generator().manual_seed(package["round"]))

    def fit(self):
        self.model.train()
        for _ in range(self.local_epoch):
            for x, y in self.trainloader:
                loss = F.cross_entropy(self.model(x), y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
        return loss.item()

    def train(self, package):
        self.set_parameters(package)
        loss = self.fit()
        return {"regular_model_params": deepcopy(self.model.state_dict()),
                "weight": len(self.partition[package["client_id"]]), "loss": loss}


def main():
    torch.manual_seed(42)
    transform = get_dataset_transforms("cifar10")
    dataset = CIFAR10Like(1200, seed=0, data_transform=transform)
    partition = {cid: list(range(cid * 120, (cid + 1) * 120)) for cid in range(10)}
    global_model = AvgCNN()
    client = FedAvgClient(deepcopy(global_model), dataset, partition)
    g = torch.Generator().manual_seed(0)
    for rnd in range(6):
        packages = [client.train({"client_id": cid, "round": rnd,
                                  "regular_model_params": global_model.state_dict()})
                    for cid in torch.randperm(10, generator=g)[:2].tolist()]
        weights = torch.tensor([p["weight"] for p in packages], dtype=torch.float)
        weights = weights / weights.sum()
        global_model.load_state_dict({k: sum(w * p["regular_model_params"][k] for w, p in zip(weights, packages))
                                      for k in packages[0]["regular_model_params"]})
        with torch.no_grad():
            x, y = next(iter(DataLoader(dataset, batch_size=400)))
            acc = (global_model(x).argmax(1) == y).float().mean().item()
        print(f"round {rnd} client loss {sum(p['loss'] for p in packages) / 2:.3f} acc {acc:.3f}")


if __name__ == "__main__":
    main()
