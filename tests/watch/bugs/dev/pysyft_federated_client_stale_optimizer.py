"""A remote-training federated setup: a FederatedClient worker that stores objects sent to it, a
TrainConfig that ships the model, loss and hyper-parameters to the worker each round, and a fit()
that builds the worker's optimizer lazily and caches it. The cache is never cleared when a new
TrainConfig (with a freshly sent model) arrives, so from the second round on the optimizer keeps
stepping the first round's copy of the model while the model the server fetches back never changes.

Thread: https://github.com/OpenMined/PySyft/pull/2268
"""
import copy

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import BatchSampler, RandomSampler


class TrainConfig:
    def __init__(self, model, loss_fn, batch_size=16, epochs=1, optimizer="SGD", lr=0.1):
        self.model, self.loss_fn = model, loss_fn
        self.batch_size, self.epochs, self.optimizer, self.lr = batch_size, epochs, optimizer, lr

    def send(self, worker):  # the model travels serialized: the worker gets its own copy
        self.model_id = worker.set_obj(copy.deepcopy(self.model))
        worker.set_obj(self)
        return self


class FederatedClient:
    def __init__(self, datasets):
        self.datasets, self.objects = datasets, {}
        self.optimizer, self.train_config = None, None

    def set_obj(self, obj):
        if isinstance(obj, TrainConfig):
            self.train_config = obj
            return None
        key = len(self.objects)
        self.objects[key] = obj
        return key

    def _build_optimizer(self, name, model, lr):
        if self.optimizer is not None:
            return self.optimizer
        self.optimizer = getattr(torch.optim, name)(model.parameters(), lr=lr)
        return self.optimizer

    def fit(self, dataset_key):
        model = self.objects[self.train_config.model_id]
        self._build_optimizer(self.train_config.optimizer, model, self.train_config.lr)
        model.train()
        x, y = self.datasets[dataset_key]
        sampler = BatchSampler(RandomSampler(range(len(y))), self.train_config.batch_size, drop_last=True)
        loss = None
        for _ in range(self.train_config.epochs):
            for idx in sampler:
                self.optimizer.zero_grad()
                loss = self.train_config.loss_fn(target=y[idx], pred=model(x[idx]))
                loss.backward()
                self.optimizer.step()
        return model, loss


def cross_entropy(target, pred):
    return F.cross_entropy(pred, target)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    w_true = torch.randn(12, 4, generator=g)
    workers = []
    for _ in range(3):
        x = torch.randn(160, 12, generator=g)
        workers.append(FederatedClient({"vectors": (x, (x @ w_true).argmax(1))}))
    global_model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 4))
    for rnd in range(8):
        states, losses = [], []
        for worker in workers:
            TrainConfig(model=global_model, loss_fn=cross_entropy).send(worker)
            model, loss = worker.fit(dataset_key="vectors")
            states.append(copy.deepcopy(model.state_dict()))
            losses.append(loss.item())
        avg = {k: torch.stack([s[k] for s in states]).mean(0) for k in states[0]}
        global_model.load_state_dict(avg)
        print(f"round {rnd} mean last-batch loss {sum(losses) / len(losses):.3f}")


if __name__ == "__main__":
    main()
