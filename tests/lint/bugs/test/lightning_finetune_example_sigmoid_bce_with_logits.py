"""
Shape: LightningModule transfer-learning example; a private __build_model() sets self.features, self.fc and self.criterion_fn = F.binary_cross_entropy_with_logits; forward() returns the head output; a loss(preds, targets) method calls self.criterion_fn(input=..., target=...); training_step/validation_step call self.forward then self.loss; Adam + MultiStepLR in configure_optimizers.
Bug: forward() ends with torch.sigmoid(x), and that output goes through self.loss to F.binary_cross_entropy_with_logits, so the sigmoid is applied twice.
Thread: https://github.com/Lightning-AI/pytorch-lightning/pull/7096
"""
import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.optim import lr_scheduler
import torchmetrics
from torchvision import models

import pytorch_lightning as pl


class CatsDogsFinetuner(pl.LightningModule):
    def __init__(self, backbone: str = "resnet50", train_bn: bool = True, milestones: tuple = (5, 10),
                 batch_size: int = 32, lr: float = 1e-2, decay_gamma: float = 1e-1,
                 num_workers: int = 6, **kwargs) -> None:
        super().__init__()
        self.backbone = backbone
        self.train_bn = train_bn
        self.milestones = milestones
        self.batch_size = batch_size
        self.lr = lr
        self.decay_gamma = decay_gamma
        self.num_workers = num_workers

        self.__build_model()

        self.acc_train = torchmetrics.Accuracy()
        self.acc_val = torchmetrics.Accuracy()
        self.save_hyperparameters()

    def __build_model(self):
        pretrained = getattr(models, self.backbone)(pretrained=True)
        self.features = nn.Sequential(*list(pretrained.children())[:-1])

        self.fc = nn.Sequential(nn.Linear(2048, 256), nn.ReLU(), nn.Linear(256, 32), nn.Linear(32, 1))

        self.criterion_fn = F.binary_cross_entropy_with_logits

    def forward(self, x):
        x = self.features(x)
        x = x.squeeze(-1).squeeze(-1)
        x = self.fc(x)
        return torch.sigmoid(x)

    def loss(self, preds, targets):
        return self.criterion_fn(input=preds, target=targets)

    def training_step(self, images_labels, step):
        x, y = images_labels
        y_out = self.forward(x)
        y_tgt = y.reshape(-1, 1).type_as(x)
        loss_value = self.loss(y_out, y_tgt)
        self.log("train_acc", self.acc_train(y_out, y_tgt.int()), prog_bar=True)
        return loss_value

    def validation_step(self, images_labels, step):
        x, y = images_labels
        y_out = self.forward(x)
        y_tgt = y.reshape(-1, 1).type_as(x)
        self.log("val_loss", self.loss(y_out, y_tgt), prog_bar=True)
        self.log("val_acc", self.acc_val(y_out, y_tgt.int()), prog_bar=True)

    def configure_optimizers(self):  # frozen backbone layers are skipped
        trainable = [p for p in self.parameters() if p.requires_grad]
        optimizer = optim.Adam(trainable, lr=self.lr)
        scheduler = lr_scheduler.MultiStepLR(optimizer, gamma=self.decay_gamma, milestones=self.milestones)
        return [optimizer], [scheduler]
