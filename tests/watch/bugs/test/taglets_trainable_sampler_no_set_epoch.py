"""A Trainable base class of a semi-supervised learning system: __init__ takes the task's initial
model, builds Adam over the parameters that require grad and a StepLR; a static _do_train(rank,
...) worker builds DistributedSampler-backed loaders for the training and validation data, and the
epoch loop calls _train_epoch and _validate_epoch and keeps a deep copy of the best model by
validation accuracy. The worker never calls train_sampler.set_epoch(epoch), so the sampler draws
the same permutation every epoch: each rank trains on the same shard in the same order, with the
same batches, for the whole run. Here the process plays rank 0 of a two-process job.

Thread: https://github.com/BatsResearch/taglets/pull/28
"""
import copy
import random

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class Task:
    def __init__(self, num_classes=8, feat_dim=32):
        self.num_classes, self.feat_dim = num_classes, feat_dim

    def get_initial_model(self):
        return nn.Sequential(nn.Linear(self.feat_dim, 64), nn.ReLU(), nn.Dropout(0.2),
                             nn.Linear(64, self.num_classes))

    def make_split(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        centres = torch.randn(self.num_classes, self.feat_dim, generator=torch.Generator().manual_seed(3))
        y = torch.randint(0, self.num_classes, (n,), generator=g)
        x = centres[y] + 1.6 * torch.randn(n, self.feat_dim, generator=g)
        return TensorDataset(x, y)


class Trainable:
    def __init__(self, task):
        self.name = "base"
        self.task = task
        self.lr = 0.0005
        self.criterion = torch.nn.CrossEntropyLoss()
        self.seed = 0
        self.num_epochs = 8
        self.batch_size = 32
        self.select_on_val = True
        self.n_proc = 2

        self.model = task.get_initial_model()
        self._init_random(self.seed)
        self._params_to_update = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.Adam(self._params_to_update, lr=self.lr, weight_decay=1e-4)
        self.lr_scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=20, gamma=0.1)

    def train(self, train_data, val_data):
        self._do_train(0, self, train_data, val_data, self.n_proc)

    @staticmethod
    def _init_random(seed):
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)

    @staticmethod
    def _do_train(rank, self, train_data, val_data, n_proc):
        train_sampler = DistributedSampler(train_data, num_replicas=n_proc, rank=rank)
        train_data_loader = DataLoader(dataset=train_data, batch_size=self.batch_size, shuffle=False,
                                       num_workers=0, sampler=train_sampler)
        val_sampler = DistributedSampler(val_data, num_replicas=n_proc, rank=rank)
        val_data_loader = DataLoader(dataset=val_data, batch_size=self.batch_size, shuffle=False,
                                     num_workers=0, sampler=val_sampler)

        best_model_to_save, best_val_acc = None, 0
        for epoch in range(self.num_epochs):
            train_loss, train_acc = self._train_epoch(train_data_loader)
            val_loss, val_acc = self._validate_epoch(val_data_loader)
            if rank == 0:
                print(f"Epoch {epoch + 1}: train loss {train_loss:.4f} acc {train_acc * 100:.2f}% "
                      f"val loss {val_loss:.4f} acc {val_acc * 100:.2f}%")
                if val_acc > best_val_acc:
                    best_model_to_save = copy.deepcopy(self.model.state_dict())
                    best_val_acc = val_acc
            if self.lr_scheduler:
                self.lr_scheduler.step()
        if rank == 0 and self.select_on_val and best_model_to_save:
            self.model.load_state_dict(best_model_to_save)

    def _train_epoch(self, train_data_loader):
        self.model.train()
        running_loss, running_acc = 0.0, 0
        for batch in train_data_loader:
            inputs, labels = batch[0], batch[1]
            self.optimizer.zero_grad()
            with torch.set_grad_enabled(True):
                outputs = self.model(inputs)
                loss = self.criterion(outputs, labels)
                loss.backward()
                self.optimizer.step()
            running_loss += loss.item()
            running_acc += (outputs.argmax(1) == labels).sum().item()
        n = len(train_data_loader.sampler)
        return running_loss / len(train_data_loader), running_acc / n

    def _validate_epoch(self, val_data_loader):
        self.model.eval()
        running_loss, running_acc = 0.0, 0
        for batch in val_data_loader:
            inputs, labels = batch[0], batch[1]
            with torch.set_grad_enabled(False):
                outputs = self.model(inputs)
                loss = torch.nn.functional.cross_entropy(outputs, labels)
            running_loss += loss.item()
            running_acc += (outputs.argmax(1) == labels).sum().item()
        n = len(val_data_loader.sampler)
        return running_loss / len(val_data_loader), running_acc / n


def main():
    task = Task()
    train_data, val_data = task.make_split(1024, seed=10), task.make_split(256, seed=11)
    Trainable(task).train(train_data, val_data)


if __name__ == "__main__":
    main()
