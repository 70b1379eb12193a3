"""A Solver class for active learning whose train() fits a VGG-style task model with BatchNorm and
Dropout and whose test(task_model) helper never calls task_model.eval(): test accuracy is measured
with dropout on and batch statistics, and the test batches overwrite BatchNorm's running stats.

Thread: https://github.com/sinhasam/vaal/issues/2
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def vgg_bn(num_classes=10):
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.ReLU(), nn.Dropout(0.5),
        nn.Linear(64, num_classes))


class Solver:
    def __init__(self, args, test_dataloader):
        self.args = args
        self.test_dataloader = test_dataloader
        self.ce_loss = nn.CrossEntropyLoss()

    def train(self, querry_dataloader, task_model):
        optim_task_model = torch.optim.SGD(task_model.parameters(), lr=0.05, momentum=0.9)
        labeled_data = iter(querry_dataloader)
        for iter_count in range(self.args["train_iterations"]):
            try:
                labeled_imgs, labels = next(labeled_data)
            except StopIteration:
                labeled_data = iter(querry_dataloader)
                labeled_imgs, labels = next(labeled_data)
            task_model.train()
            preds = task_model(labeled_imgs)
            task_loss = self.ce_loss(preds, labels)
            optim_task_model.zero_grad()
            task_loss.backward()
            optim_task_model.step()
            if iter_count % 20 == 0:
                print(f"iter {iter_count} task loss {task_loss.item():.4f} "
                      f"test acc {self.test(task_model):.3f}")
        return self.test(task_model)

    def test(self, task_model):
        total, correct = 0, 0
        for imgs, labels in self.test_dataloader:
            with torch.no_grad():
                preds = task_model(imgs)
            correct += (preds.argmax(1) == labels).sum().item()
            total += imgs.size(0)
        return correct / total


def cifar_like(n, seed):
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(10, 3, 16, 16, generator=torch.Generator().manual_seed(123))
    y = torch.randint(0, 10, (n,), generator=g)
    return TensorDataset(protos[y] + 1.5 * torch.randn(n, 3, 16, 16, generator=g), y)


def main():
    torch.manual_seed(0)
    train_loader = DataLoader(cifar_like(1024, 0), batch_size=32, shuffle=True, drop_last=True,
                              generator=torch.Generator().manual_seed(0))
    test_loader = DataLoader(cifar_like(512, 1), batch_size=16)
    acc = Solver({"train_iterations": 120}, test_loader).train(train_loader, vgg_bn())
    print(f"final test accuracy {acc:.3f}")


if __name__ == "__main__":
    main()
