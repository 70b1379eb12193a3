"""A tabular AutoML pipeline's trainer component: a BaseTrainerComponent with prepare(),
train_epoch() and train_step(), specialised by a StandardTrainer whose data_preparation() and
criterion_preparation() hooks pass the batch through unchanged; the pipeline picks an MLP, Adam
and a CosineAnnealingWarmRestarts scheduler whose T_0 is a number of epochs, and fits for a
fixed number of epochs. train_step() calls scheduler.step() after every optimizer.step(), so the
cosine restarts every T_0 batches instead of every T_0 epochs and the learning rate swings from
its maximum to about zero many times per epoch.

Thread: https://github.com/automl/Auto-PyTorch/pull/210
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class BaseTrainerComponent:
    def prepare(self, model, criterion, optimizer, scheduler, device="cpu"):
        self.model, self.criterion, self.optimizer, self.scheduler = model, criterion, optimizer, scheduler
        self.device = device

    def train_epoch(self, train_loader, epoch):
        loss_sum, n = 0.0, 0
        self.model.train()
        for step, (data, targets) in enumerate(train_loader):
            loss, _ = self.train_step(data, targets)
            loss_sum += loss * data.size(0)
            n += data.size(0)
        return loss_sum / n

    def train_step(self, data, targets):
        data = data.float().to(self.device)
        targets = targets.long().to(self.device)
        data, criterion_kwargs = self.data_preparation(data, targets)
        self.optimizer.zero_grad()
        outputs = self.model(data)
        loss_func = self.criterion_preparation(**criterion_kwargs)
        loss = loss_func(self.criterion, outputs)
        loss.backward()
        self.optimizer.step()
        if self.scheduler:
            if "ReduceLROnPlateau" in self.scheduler.__class__.__name__:
                self.scheduler.step(loss)
            else:
                self.scheduler.step()
        return loss.item(), outputs

    def evaluate(self, test_loader):
        self.model.eval()
        correct = total = 0
        with torch.no_grad():
            for data, targets in test_loader:
                correct += (self.model(data.float()).argmax(1) == targets).sum().item()
                total += targets.numel()
        self.model.train()
        return correct / total

    def data_preparation(self, X, y):
        raise NotImplementedError

    def criterion_preparation(self, y_a, y_b=None, lam=1.0):
        raise NotImplementedError


class StandardTrainer(BaseTrainerComponent):
    def data_preparation(self, X, y):
        return X, {"y_a": y}

    def criterion_preparation(self, y_a, y_b=None, lam=1.0):
        return lambda criterion, pred: criterion(pred, y_a)


def build_mlp(in_features, num_classes, width=64, num_layers=3):
    layers, d = [], in_features
    for _ in range(num_layers):
        layers += [nn.Linear(d, width), nn.ReLU()]
        d = width
    return nn.Sequential(*layers, nn.Linear(d, num_classes))


def tabular_task(n, d=20, num_classes=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(d, num_classes, generator=torch.Generator().manual_seed(99))
    X = torch.randn(n, d, generator=g)
    y = (X @ w + 0.5 * torch.randn(n, num_classes, generator=g)).argmax(1)
    return TensorDataset(X, y)


def main():
    torch.manual_seed(0)
    config = {"lr": 1e-3, "T_0": 8, "T_mult": 1, "epochs": 8, "batch_size": 64}
    train_loader = DataLoader(tabular_task(1600, seed=0), batch_size=config["batch_size"], shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    val_loader = DataLoader(tabular_task(800, seed=1), batch_size=400)
    model = build_mlp(20, 4)
    optimizer = torch.optim.Adam(model.parameters(), lr=config["lr"])
    scheduler = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=config["T_0"],
                                                                     T_mult=config["T_mult"])
    trainer = StandardTrainer()
    trainer.prepare(model, nn.CrossEntropyLoss(), optimizer, scheduler)
    for epoch in range(config["epochs"]):
        train_loss = trainer.train_epoch(train_loader, epoch)
        val_acc = trainer.evaluate(val_loader)
        print(f"epoch {epoch}: train loss {train_loss:.4f} val acc {val_acc:.3f} "
              f"lr {optimizer.param_groups[0]['lr']:.2e}")


if __name__ == "__main__":
    main()
