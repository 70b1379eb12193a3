"""A population-based-training example for a distributed-trainer library: train_func(config) builds
a small CNN and SGD with lr and momentum taken from config, and if the session hands it a
checkpoint it loads the model and optimizer state dicts from it; then for every epoch it runs
train_epoch(dataloader, model, loss_fn, optimizer) and validate_epoch(dataloader, model, loss_fn)
and reports the validation loss together with a checkpoint dict {"model", "optimizer"}. A PBT
scheduler (perturbation every iteration, lr resampled from uniform(0.001, 1) or scaled by 0.8/1.2,
momentum moved within [0.8, 0.9, 0.99]) restarts the weaker trials from a stronger trial's
checkpoint with a mutated config. optimizer.load_state_dict() brings back the lr and momentum
stored in the checkpoint over the ones the constructor got from the mutated config, so no
mutation ever reaches the optimizer and every trial keeps training with an initial lr.

Thread: https://github.com/ray-project/ray/pull/29060
"""
import copy
import random

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

NUM_CLASSES = 10


def make_images(n, seed):
    protos = torch.randn(NUM_CLASSES, 3, 16, 16, generator=torch.Generator().manual_seed(11))
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, NUM_CLASSES, (n,), generator=g)
    x = 0.6 * protos[y] + torch.randn(n, 3, 16, 16, generator=g)
    return TensorDataset(x, y)


TRAIN_SET = make_images(512, seed=1)
VALID_SET = make_images(256, seed=2)


class SmallConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(32, NUM_CLASSES)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


class Session:
    """Stands in for the trial session: hands out the checkpoint the trial was (re)started from."""

    def __init__(self, checkpoint=None):
        self._checkpoint = checkpoint

    def get_checkpoint(self):
        return self._checkpoint


def train_epoch(dataloader, model, loss_fn, optimizer):
    model.train()
    for X, y in dataloader:
        pred = model(X)
        loss = loss_fn(pred, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def validate_epoch(dataloader, model, loss_fn):
    model.eval()
    test_loss, correct = 0.0, 0
    with torch.no_grad():
        for X, y in dataloader:
            pred = model(X)
            test_loss += loss_fn(pred, y).item()
            correct += (pred.argmax(1) == y).float().sum().item()
    return {"loss": test_loss / len(dataloader), "accuracy": correct / len(dataloader.dataset)}


def train_func(config, session):
    """Generator: yields (result, checkpoint) once per epoch, like a reporting trial function."""
    model = SmallConvNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=config.get("lr", 0.1),
                                momentum=config.get("momentum", 0.9))

    checkpoint = session.get_checkpoint()
    if checkpoint:
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])

    g = torch.Generator().manual_seed(config["loader_seed"])
    train_loader = DataLoader(TRAIN_SET, batch_size=config["batch_size"], shuffle=True, generator=g)
    validation_loader = DataLoader(VALID_SET, batch_size=config["batch_size"])
    criterion = nn.CrossEntropyLoss()

    while True:
        train_epoch(train_loader, model, criterion, optimizer)
        result = validate_epoch(validation_loader, model, criterion)
        yield result, {"model": copy.deepcopy(model.state_dict()),
                       "optimizer": copy.deepcopy(optimizer.state_dict())}


class PopulationBasedTraining:
    def __init__(self, hyperparam_mutations, quantile_fraction=0.25, resample_probability=0.25, seed=0):
        self.mutations = hyperparam_mutations
        self.quantile_fraction = quantile_fraction
        self.resample_probability = resample_probability
        self.rng = random.Random(seed)

    def explore(self, config):
        new = dict(config)
        for key, spec in self.mutations.items():
            if isinstance(spec, list):
                i = spec.index(config[key]) if config[key] in spec else 0
                new[key] = spec[max(0, min(len(spec) - 1, i + self.rng.choice([-1, 1])))]
            elif self.rng.random() < self.resample_probability:
                new[key] = spec(self.rng)
            else:
                new[key] = config[key] * self.rng.choice([0.8, 1.2])
        return new


def main():
    torch.manual_seed(0)
    rng = random.Random(0)
    pbt = PopulationBasedTraining(hyperparam_mutations={
        "lr": lambda r: r.uniform(0.001, 1),
        "momentum": [0.8, 0.9, 0.99],
    })
    trials = []
    for i in range(4):
        config = {"lr": rng.choice([0.001, 0.01, 0.1]), "momentum": 0.8, "batch_size": 64, "loader_seed": i}
        trials.append({"config": config, "runner": train_func(config, Session())})

    for iteration in range(1, 7):
        for t in trials:
            t["result"], t["checkpoint"] = next(t["runner"])
        ranked = sorted(trials, key=lambda t: t["result"]["loss"])
        n_q = max(1, int(len(trials) * pbt.quantile_fraction))
        for t in trials:
            print(f"iter {iteration} lr {t['config']['lr']:.4f} momentum {t['config']['momentum']} "
                  f"val loss {t['result']['loss']:.4f} acc {t['result']['accuracy']:.3f}")
        for weak, strong in zip(ranked[-n_q:], ranked[:n_q]):
            new_config = pbt.explore(strong["config"])
            new_config["loader_seed"] = weak["config"]["loader_seed"] + 10 * iteration
            weak["runner"].close()
            weak["config"] = new_config
            weak["runner"] = train_func(new_config, Session(copy.deepcopy(strong["checkpoint"])))
            print(f"  exploit: restart from the best trial with lr {new_config['lr']:.4f} "
                  f"momentum {new_config['momentum']}")

    best = min(trials, key=lambda t: t["result"]["loss"])
    print(f"best trial: lr {best['config']['lr']:.4f} val loss {best['result']['loss']:.4f}")


if __name__ == "__main__":
    main()
