"""A Trainer whose train() builds its DataLoader from a dataloader_params dict; the dict gives only
the batch size, so the loader keeps DataLoader's default shuffle=False over a dataset stored class
by class, and every batch holds a single class.

Thread: https://github.com/Deci-AI/super-gradients/issues/416
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def sorted_dataset(classes=8, per_class=128, dim=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(classes, dim, generator=g) * 1.5
    xs, ys = [], []
    for c in range(classes):  # stored folder by folder, as an image-folder dataset is
        xs.append(centers[c] + torch.randn(per_class, dim, generator=g))
        ys.append(torch.full((per_class,), c))
    return TensorDataset(torch.cat(xs), torch.cat(ys))


class Trainer:
    def __init__(self, experiment_name):
        self.experiment_name = experiment_name

    def train(self, model, training_params, train_set, valid_set, dataloader_params):
        train_loader = DataLoader(train_set, **dataloader_params)
        valid_loader = DataLoader(valid_set, batch_size=256)
        optimizer = torch.optim.SGD(model.parameters(), lr=training_params["initial_lr"],
                                    **training_params["optimizer_params"])
        loss_fn = nn.CrossEntropyLoss()
        for epoch in range(training_params["max_epochs"]):
            model.train()
            for x, y in train_loader:
                optimizer.zero_grad()
                loss = loss_fn(model(x), y)
                loss.backward()
                optimizer.step()
            print(f"epoch {epoch} valid accuracy {self.evaluate(model, valid_loader):.3f}")

    @staticmethod
    def evaluate(model, loader):
        model.eval()
        correct = total = 0
        with torch.no_grad():
            for x, y in loader:
                correct += (model(x).argmax(1) == y).sum().item()
                total += len(y)
        return correct / total


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8))
    train_params = {"max_epochs": 3, "initial_lr": 0.05,
                    "optimizer_params": {"momentum": 0.9, "nesterov": True, "weight_decay": 1e-4}}
    dataloader_params = {"batch_size": 32}
    Trainer("sorted_classes").train(model, train_params, sorted_dataset(), sorted_dataset(seed=1),
                                    dataloader_params)


if __name__ == "__main__":
    main()
