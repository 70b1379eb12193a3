"""
Shape: a minimal LightningModule migrated from a plain loop: a random classification Dataset, a module holding one
Linear layer and a CrossEntropyLoss attribute, training_step computing the loss from the batch and returning it,
configure_optimizers returning the AdamW class imported from transformers, and a Trainer(max_epochs=...) fitted on a
DataLoader; Lightning's automatic optimization runs training_step and backward inside a closure passed to
optimizer.step.
Bug: the transformers AdamW.step is wrapped in torch.no_grad and calls the closure inside it without re-enabling
grad, so training_step's forward and loss are computed with autograd off and the loss has no grad_fn when backward
runs (RuntimeError: element 0 of tensors does not require grad).
Thread: https://github.com/Lightning-AI/pytorch-lightning/issues/18254
"""
import torch
from lightning.pytorch import LightningModule, Trainer
from torch.utils.data import DataLoader, Dataset
from transformers import AdamW


class NoiseSet(Dataset):
    def __init__(self, n_rows):
        self.n_rows = n_rows
        self.x = torch.randn(n_rows, 31)
        self.y = torch.zeros(n_rows, dtype=torch.long)

    def __getitem__(self, idx):
        return self.x[idx], self.y[idx]

    def __len__(self):
        return self.n_rows


class TinyClassifier(LightningModule):
    def __init__(self, lr=1e-3):
        super().__init__()
        self.proj = torch.nn.Linear(31, 2)
        self.criterion = torch.nn.CrossEntropyLoss()
        self.lr = lr

    def forward(self, x):
        return self.proj(x)

    def training_step(self, batch, batch_idx):
        feats, target = batch
        scores = self.proj(feats)
        loss = self.criterion(scores, target)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        feats, target = batch
        self.log("val_loss", self.criterion(self(feats), target))

    def configure_optimizers(self):
        return AdamW(self.parameters(), lr=self.lr)


def run():
    train_dl = DataLoader(NoiseSet(64), batch_size=2, shuffle=True)
    val_dl = DataLoader(NoiseSet(64), batch_size=2)
    module = TinyClassifier()
    trainer = Trainer(max_epochs=1, limit_train_batches=10, limit_val_batches=5, enable_model_summary=False)
    trainer.fit(module, train_dataloaders=train_dl, val_dataloaders=val_dl)


if __name__ == "__main__":
    run()
