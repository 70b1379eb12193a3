"""A domain-generalisation algorithm class whose train() loop evaluates after each epoch through a
get_test_accuracy(case) method that runs the model under no_grad but never switches it to eval():
BatchNorm normalises the test batches with their own statistics and folds them into its running
averages.

Thread: https://github.com/microsoft/robustdg/issues/30
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class BaseAlgo:
    def __init__(self, args, train_dataset, val_dataset, test_dataset, phi):
        self.args = args
        self.train_dataset, self.val_dataset, self.test_dataset = train_dataset, val_dataset, test_dataset
        self.phi = phi
        self.opt = torch.optim.SGD(self.phi.parameters(), lr=args["lr"], momentum=0.9,
                                   weight_decay=5e-4)

    def get_test_accuracy(self, case):
        test_acc, test_size = 0, 0
        dataset = self.val_dataset if case == "val" else self.test_dataset
        for x_e, y_e in dataset:
            with torch.no_grad():
                out = self.phi(x_e)
                test_acc += torch.sum(torch.argmax(out, dim=1) == y_e).item()
                test_size += y_e.shape[0]
        return 100 * test_acc / test_size


class Hybrid(BaseAlgo):
    def train(self):
        loss_fn = nn.CrossEntropyLoss()
        for epoch in range(self.args["epochs"]):
            penalty_erm = 0.0
            self.phi.train()
            for x_e, y_e in self.train_dataset:
                self.opt.zero_grad()
                loss_e = loss_fn(self.phi(x_e), y_e)
                loss_e.backward()
                self.opt.step()
                penalty_erm += loss_e.item()
            print(f"epoch {epoch} erm {penalty_erm / len(self.train_dataset):.3f} "
                  f"val {self.get_test_accuracy('val'):.1f} test {self.get_test_accuracy('test'):.1f}")


def xray_like(n, shift, seed):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 2, (n,), generator=g)
    x = torch.randn(n, 1, 16, 16, generator=g) + y.view(-1, 1, 1, 1) * 0.15 + shift  # hospitals differ
    return TensorDataset(x, y)


def main():
    torch.manual_seed(0)
    phi = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 2))
    mk = lambda ds, shuffle: DataLoader(ds, batch_size=32, shuffle=shuffle,  # noqa: E731
                                        generator=torch.Generator().manual_seed(0))
    algo = Hybrid({"lr": 0.02, "epochs": 4}, mk(xray_like(640, 0.0, 0), True),
                  mk(xray_like(256, 0.0, 1), False), mk(xray_like(256, 1.5, 2), False), phi)
    algo.train()


if __name__ == "__main__":
    main()
