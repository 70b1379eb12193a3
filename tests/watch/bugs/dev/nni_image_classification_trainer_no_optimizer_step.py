"""An image-classification trainer class of an architecture-search toolkit: the constructor takes the
model plus class names and keyword dicts for the dataset, the DataLoader, the optimizer (looked up
with getattr(torch.optim, name)) and the trainer (max_epochs), and builds CrossEntropyLoss, the
train/val datasets and loaders and the optimizer; training_step and validation_step are split into
*_before_model / *_after_model hooks, validation_epoch_end averages the per-batch accuracies and
reports them, and fit() runs _train() for max_epochs and then reports the final validation accuracy.
_train() computes the loss and calls loss.backward() for every batch but never calls
optimizer.step() (nor zero_grad()), so the model is never updated and the reported accuracy stays at
its initial value.

Thread: https://github.com/microsoft/nni/pull/3339
"""
from typing import Any, Dict, List, Tuple

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

REPORTS = {"intermediate": [], "final": None}


def report_intermediate_result(value):
    REPORTS["intermediate"].append(value)
    print(f"intermediate result {value:.3f}")


def report_final_result(value):
    REPORTS["final"] = value
    print(f"final result {value:.3f}")


def synthetic_digits(train: bool, size: int = 28, n_train: int = 640, n_val: int = 320):
    """Stand-in for a torchvision dataset class: normalized 1x28x28 images, ten classes."""
    templates = torch.randn(10, 1, size, size, generator=torch.Generator().manual_seed(7))
    g = torch.Generator().manual_seed(1 if train else 2)
    n = n_train if train else n_val
    y = torch.randint(0, 10, (n,), generator=g)
    x = 0.5 * templates[y] + torch.randn(n, 1, size, size, generator=g)
    return TensorDataset(x, y)


DATASETS = {"Digits": synthetic_digits}


class SmallConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.fc = nn.Linear(16 * 7 * 7, 10)

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))


class ImageClassificationTrainer:
    def __init__(self, model, dataset_cls="Digits", dataset_kwargs=None, dataloader_kwargs=None,
                 optimizer_cls="SGD", optimizer_kwargs=None, trainer_kwargs=None):
        self.model = model
        self._loss_fn = nn.CrossEntropyLoss()
        self._train_dataset = DATASETS[dataset_cls](train=True, **(dataset_kwargs or {}))
        self._val_dataset = DATASETS[dataset_cls](train=False, **(dataset_kwargs or {}))
        self._optimizer = getattr(torch.optim, optimizer_cls)(model.parameters(), **(optimizer_kwargs or {}))
        self._trainer_kwargs = trainer_kwargs or {"max_epochs": 10}
        self._train_dataloader = DataLoader(self._train_dataset, **(dataloader_kwargs or {}))
        self._val_dataloader = DataLoader(self._val_dataset, **(dataloader_kwargs or {}))

    def _accuracy(self, output, target):
        _, predict = torch.max(output.data, 1)
        return predict.eq(target.data).sum().item() / output.size(0)

    def training_step(self, batch: Tuple[torch.Tensor, torch.Tensor], batch_idx: int):
        x, y = self.training_step_before_model(batch, batch_idx)
        y_hat = self.model(x)
        return self.training_step_after_model(x, y, y_hat)

    def training_step_before_model(self, batch, batch_idx):
        x, y = batch
        return x, y

    def training_step_after_model(self, x, y, y_hat):
        return self._loss_fn(y_hat, y)

    def validation_step(self, batch, batch_idx) -> Dict[str, Any]:
        x, y = self.validation_step_before_model(batch, batch_idx)
        y_hat = self.model(x)
        return self.validation_step_after_model(x, y, y_hat)

    def validation_step_before_model(self, batch, batch_idx):
        x, y = batch
        return x, y

    def validation_step_after_model(self, x, y, y_hat):
        return {"val_acc": self._accuracy(y_hat, y)}

    def validation_epoch_end(self, outputs: List[Dict[str, Any]]) -> Dict[str, Any]:
        avg_acc = np.mean([o["val_acc"] for o in outputs]).item()
        report_intermediate_result(avg_acc)
        return {"val_acc": avg_acc}

    def _validate(self):
        outputs = [self.validation_step(batch, i) for i, batch in enumerate(self._val_dataloader)]
        return self.validation_epoch_end(outputs)

    def _train(self):
        for i, batch in enumerate(self._train_dataloader):
            loss = self.training_step(batch, i)
            loss.backward()
        print(f"last batch loss {loss.item():.4f}")

    def fit(self) -> None:
        for _ in range(self._trainer_kwargs["max_epochs"]):
            self._train()
        report_final_result(self._validate()["val_acc"])


def main():
    torch.manual_seed(0)
    trainer = ImageClassificationTrainer(
        SmallConvNet(), dataset_cls="Digits",
        dataloader_kwargs={"batch_size": 64, "shuffle": True, "generator": torch.Generator().manual_seed(0)},
        optimizer_cls="SGD", optimizer_kwargs={"lr": 0.05, "momentum": 0.9},
        trainer_kwargs={"max_epochs": 10})
    trainer.fit()


if __name__ == "__main__":
    main()
