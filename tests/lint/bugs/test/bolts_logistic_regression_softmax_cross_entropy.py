"""
Shape: a LightningModule logistic-regression model from a model zoo. __init__ saves hyperparameters (input dim, number of classes, bias, lr, optimizer class, L1/L2 strengths) and builds a single nn.Linear; forward applies torch.nn.functional.softmax (imported by name) to the linear output; training_step flattens the input, calls self(x), computes F.cross_entropy with reduction='sum', adds optional L1/L2 penalties and divides by the batch size; validation_step/test_step reuse self(x) for accuracy and cross-entropy; configure_optimizers instantiates the optimizer class passed in; a cli_main fits it on the iris data through an sklearn datamodule and pl.Trainer.
Bug: forward returns softmax probabilities and training_step feeds them to F.cross_entropy, which applies its own log-softmax, so the model is trained through two softmaxes.
Thread: https://github.com/Lightning-Universe/lightning-bolts/pull/655
"""
from argparse import ArgumentParser

import pytorch_lightning as pl
import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.functional import softmax
from torch.optim import Adam
from torch.optim.optimizer import Optimizer
from torchmetrics.functional import accuracy


class SoftmaxRegression(pl.LightningModule):
    def __init__(self, input_dim: int, num_classes: int, bias: bool = True, learning_rate: float = 1e-4,
                 optimizer: Optimizer = Adam, l1_strength: float = 0.0, l2_strength: float = 0.0, **kwargs):
        super().__init__()
        self.save_hyperparameters()
        self.opt_cls = optimizer
        self.fc = nn.Linear(self.hparams.input_dim, self.hparams.num_classes, bias=bias)

    def forward(self, x):
        scores = self.fc(x)
        return softmax(scores)

    def training_step(self, batch, batch_idx):
        x, y = batch
        x = x.view(x.size(0), -1)
        probs = self(x)
        loss = F.cross_entropy(probs, y, reduction="sum")
        if self.hparams.l1_strength > 0:
            loss += self.hparams.l1_strength * sum(p.abs().sum() for p in self.parameters())
        if self.hparams.l2_strength > 0:
            loss += self.hparams.l2_strength * sum(p.pow(2).sum() for p in self.parameters())
        loss /= x.size(0)
        logs = {"train_ce_loss": loss}
        return {"loss": loss, "log": logs, "progress_bar": logs}

    def validation_step(self, batch, batch_idx):
        x, y = batch
        x = x.view(x.size(0), -1)
        probs = self(x)
        return {"val_loss": F.cross_entropy(probs, y), "acc": accuracy(probs, y)}

    def validation_epoch_end(self, outputs):
        acc = torch.stack([o["acc"] for o in outputs]).mean()
        val_loss = torch.stack([o["val_loss"] for o in outputs]).mean()
        logs = {"val_ce_loss": val_loss, "val_acc": acc}
        return {"val_loss": val_loss, "log": logs, "progress_bar": logs}

    def test_step(self, batch, batch_idx):
        x, y = batch
        x = x.view(x.size(0), -1)
        probs = self(x)
        return {"test_loss": F.cross_entropy(probs, y), "acc": accuracy(probs, y)}

    def configure_optimizers(self):
        return self.opt_cls(self.parameters(), lr=self.hparams.learning_rate)

    @staticmethod
    def add_model_specific_args(parent):
        p = ArgumentParser(parents=[parent], add_help=False)
        p.add_argument("--learning_rate", type=float, default=1e-4)
        p.add_argument("--input_dim", type=int, default=None)
        p.add_argument("--num_classes", type=int, default=None)
        p.add_argument("--batch_size", type=int, default=16)
        return p


def cli_main():
    from pl_bolts.datamodules.sklearn_datamodule import SklearnDataModule
    from sklearn.datasets import load_iris

    pl.seed_everything(1234)
    parser = ArgumentParser()
    parser = SoftmaxRegression.add_model_specific_args(parser)
    parser = pl.Trainer.add_argparse_args(parser)
    args = parser.parse_args()

    model = SoftmaxRegression(input_dim=4, num_classes=3, l1_strength=0.01, learning_rate=0.01)
    feats, labels = load_iris(return_X_y=True)
    dm = SklearnDataModule(feats, labels, batch_size=args.batch_size, num_workers=0)
    trainer = pl.Trainer.from_argparse_args(args)
    trainer.fit(model, train_dataloader=dm.train_dataloader(), val_dataloaders=dm.val_dataloader())


if __name__ == "__main__":
    cli_main()
