"""A config-driven template project: a DataModule whose setup(stage) pools the "train" and "test"
files into one dataset and cuts it into train/val/test with random_split(sizes), a LightningModule
(dense net with BatchNorm, training_step / validation_step / test_step, Adam built from the config)
and a small Trainer whose fit() and test() each call datamodule.setup(stage), like Lightning does.
The seed is set once at the start of the run. random_split is called without its own generator, so
the second setup() (before test) draws a different permutation from the global generator, which
training has advanced: the new test split is mostly rows the model was trained on and the reported
test accuracy is inflated.

Thread: https://github.com/ashleve/lightning-hydra-template/issues/184
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import ConcatDataset, DataLoader, TensorDataset, random_split

CONFIG = {
    "seed": 12345,
    "datamodule": {"train_val_test_split": [2100, 450, 450], "batch_size": 64},
    "model": {"input_size": 64, "lin1_size": 128, "lin2_size": 128, "output_size": 10,
              "optimizer": {"lr": 2e-3, "weight_decay": 0.0}},
    "trainer": {"max_epochs": 4},
}


def make_pool(n, seed, num_classes=10, dim=64):
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(num_classes, dim, generator=torch.Generator().manual_seed(7))
    y = torch.randint(0, num_classes, (n,), generator=g)
    x = protos[y] + 1.6 * torch.randn(n, dim, generator=g)
    flip = torch.rand(n, generator=g) < 0.2
    y = torch.where(flip, torch.randint(0, num_classes, (n,), generator=g), y)
    return TensorDataset(x, y)


class DigitsDataModule:
    def __init__(self, train_val_test_split, batch_size):
        self.train_val_test_split, self.batch_size = train_val_test_split, batch_size
        self.data_train = self.data_val = self.data_test = None

    def prepare_data(self):
        pass  # files already on disk in the real project

    def setup(self, stage=None):
        trainset, testset = make_pool(2400, seed=1), make_pool(600, seed=2)
        dataset = ConcatDataset([trainset, testset])
        self.data_train, self.data_val, self.data_test = random_split(dataset, self.train_val_test_split)

    def train_dataloader(self):
        return DataLoader(self.data_train, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.data_val, batch_size=self.batch_size)

    def test_dataloader(self):
        return DataLoader(self.data_test, batch_size=self.batch_size)


class DenseNetModule(nn.Module):
    def __init__(self, input_size, lin1_size, lin2_size, output_size, optimizer):
        super().__init__()
        self.optimizer_cfg = optimizer
        self.net = nn.Sequential(
            nn.Linear(input_size, lin1_size), nn.BatchNorm1d(lin1_size), nn.ReLU(),
            nn.Linear(lin1_size, lin2_size), nn.BatchNorm1d(lin2_size), nn.ReLU(),
            nn.Linear(lin2_size, output_size))

    def forward(self, x):
        return self.net(x)

    def step(self, batch):
        x, y = batch
        logits = self(x)
        return F.cross_entropy(logits, y), (logits.argmax(1) == y).float().sum().item(), len(y)

    def training_step(self, batch, batch_idx):
        return self.step(batch)[0]

    def validation_step(self, batch, batch_idx):
        return self.step(batch)

    test_step = validation_step

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), **self.optimizer_cfg)


class Trainer:
    def __init__(self, max_epochs):
        self.max_epochs = max_epochs

    def _evaluate(self, model, loader, hook):
        model.eval()
        correct = total = 0
        with torch.no_grad():
            for i, batch in enumerate(loader):
                _, c, n = hook(batch, i)
                correct, total = correct + c, total + n
        return correct / total

    def fit(self, model, datamodule):
        datamodule.setup("fit")
        optimizer = model.configure_optimizers()
        for epoch in range(self.max_epochs):
            model.train()
            for i, batch in enumerate(datamodule.train_dataloader()):
                loss = model.training_step(batch, i)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            val_acc = self._evaluate(model, datamodule.val_dataloader(), model.validation_step)
            print(f"epoch {epoch} train/loss {loss.item():.4f} val/acc {val_acc:.3f}")

    def test(self, model, datamodule):
        datamodule.setup("test")
        print(f"test/acc {self._evaluate(model, datamodule.test_dataloader(), model.test_step):.3f}")


def main(cfg):
    torch.manual_seed(cfg["seed"])
    datamodule = DigitsDataModule(**cfg["datamodule"])
    model = DenseNetModule(**cfg["model"])
    trainer = Trainer(**cfg["trainer"])
    trainer.fit(model, datamodule)
    trainer.test(model, datamodule)


if __name__ == "__main__":
    main(CONFIG)
