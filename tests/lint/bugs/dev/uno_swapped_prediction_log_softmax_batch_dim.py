"""
Shape: LightningModule Discoverer: builds a MultiHeadResNet from hparams and loads a pretrained state dict, a SinkhornKnopp pseudo-labeller, configure_optimizers with SGD + LinearWarmupCosineAnnealingLR; utility methods cross_entropy_loss(preds, targets) (soft-target cross-entropy written with F.log_softmax) and swapped_prediction(logits, targets) looping over views; training_step builds (views, heads, batch, classes) logits and targets and averages the swapped losses over heads; main() builds the datamodule and a pl.Trainer.
Bug: cross_entropy_loss calls F.log_softmax(preds / T, dim=1) on per-view logits of shape (heads, batch, classes), so it normalises over the batch axis instead of the class axis.
Thread: https://github.com/DonkeyShot21/UNO/issues/4
"""
from argparse import ArgumentParser

import numpy as np
import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from pl_bolts.optimizers.lr_scheduler import LinearWarmupCosineAnnealingLR

from utils.data import get_datamodule
from utils.nets import MultiHeadResNet
from utils.sinkhorn_knopp import SinkhornKnopp

parser = ArgumentParser()
parser.add_argument("--dataset", default="CIFAR100", type=str)
parser.add_argument("--arch", default="resnet18", type=str)
parser.add_argument("--base_lr", default=0.1, type=float)
parser.add_argument("--min_lr", default=0.001, type=float)
parser.add_argument("--momentum_opt", default=0.9, type=float)
parser.add_argument("--weight_decay_opt", default=1.0e-4, type=float)
parser.add_argument("--warmup_epochs", default=10, type=int)
parser.add_argument("--proj_dim", default=256, type=int)
parser.add_argument("--hidden_dim", default=2048, type=int)
parser.add_argument("--overcluster_factor", default=3, type=int)
parser.add_argument("--num_heads", default=5, type=int)
parser.add_argument("--num_hidden_layers", default=1, type=int)
parser.add_argument("--num_iters_sk", default=3, type=int)
parser.add_argument("--epsilon_sk", default=0.05, type=float)
parser.add_argument("--num_views", default=2, type=int)
parser.add_argument("--temperature", default=0.1, type=float)
parser.add_argument("--num_labeled_classes", default=80, type=int)
parser.add_argument("--num_unlabeled_classes", default=20, type=int)
parser.add_argument("--pretrained", type=str)
parser.add_argument("--max_epochs", default=200, type=int)


class Discoverer(pl.LightningModule):
    def __init__(self, **kwargs):
        super().__init__()
        self.save_hyperparameters({k: v for (k, v) in kwargs.items() if not callable(v)})
        self.model = MultiHeadResNet(
            arch=self.hparams.arch,
            low_res="CIFAR" in self.hparams.dataset,
            num_labeled=self.hparams.num_labeled_classes,
            num_unlabeled=self.hparams.num_unlabeled_classes,
            proj_dim=self.hparams.proj_dim,
            hidden_dim=self.hparams.hidden_dim,
            overcluster_factor=self.hparams.overcluster_factor,
            num_heads=self.hparams.num_heads,
            num_hidden_layers=self.hparams.num_hidden_layers,
        )
        state = torch.load(self.hparams.pretrained)
        self.model.load_state_dict({k: v for k, v in state.items() if "unlab" not in k}, strict=False)
        self.sk = SinkhornKnopp(num_iters=self.hparams.num_iters_sk, epsilon=self.hparams.epsilon_sk)
        self.register_buffer("loss_per_head", torch.zeros(self.hparams.num_heads))

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.model.parameters(), lr=self.hparams.base_lr,
                                    momentum=self.hparams.momentum_opt, weight_decay=self.hparams.weight_decay_opt)
        scheduler = LinearWarmupCosineAnnealingLR(optimizer, warmup_epochs=self.hparams.warmup_epochs,
                                                  max_epochs=self.hparams.max_epochs,
                                                  warmup_start_lr=self.hparams.min_lr, eta_min=self.hparams.min_lr)
        return [optimizer], [scheduler]

    def cross_entropy_loss(self, preds, targets):
        preds = F.log_softmax(preds / self.hparams.temperature, dim=1)
        return -torch.mean(torch.sum(targets * preds, dim=1))

    def swapped_prediction(self, logits, targets):
        loss = 0
        for view in range(self.hparams.num_views):
            for other in np.delete(range(self.hparams.num_views), view):
                loss += self.cross_entropy_loss(logits[other], targets[view])
        return loss / (self.hparams.num_views * (self.hparams.num_views - 1))

    def forward(self, x):
        return self.model(x)

    def training_step(self, batch, idx):
        views, labels = batch
        mask_lab = labels < self.hparams.num_labeled_classes
        nlc = self.hparams.num_labeled_classes
        self.model.normalize_prototypes()
        outputs = self.model(views)
        outputs["logits_lab"] = outputs["logits_lab"].unsqueeze(1).expand(-1, self.hparams.num_heads, -1, -1)
        logits = torch.cat([outputs["logits_lab"], outputs["logits_unlab"]], dim=-1)
        logits_over = torch.cat([outputs["logits_lab"], outputs["logits_unlab_over"]], dim=-1)

        targets_lab = F.one_hot(labels[mask_lab], num_classes=nlc).float().to(self.device)
        targets = torch.zeros_like(logits)
        targets_over = torch.zeros_like(logits_over)
        for v in range(self.hparams.num_views):
            for h in range(self.hparams.num_heads):
                targets[v, h, mask_lab, :nlc] = targets_lab.type_as(targets)
                targets_over[v, h, mask_lab, :nlc] = targets_lab.type_as(targets)
                targets[v, h, ~mask_lab, nlc:] = self.sk(outputs["logits_unlab"][v, h, ~mask_lab]).type_as(targets)
                targets_over[v, h, ~mask_lab, nlc:] = self.sk(outputs["logits_unlab_over"][v, h, ~mask_lab]).type_as(targets)

        loss_cluster, loss_overcluster = [], []
        for h in range(self.hparams.num_heads):
            loss_cluster.append(self.swapped_prediction(logits, targets))
            loss_overcluster.append(self.swapped_prediction(logits_over, targets_over))
        loss_cluster = torch.stack(loss_cluster)
        loss_overcluster = torch.stack(loss_overcluster)
        loss = (loss_cluster + loss_overcluster).mean()
        self.loss_per_head += loss_cluster.clone().detach()
        return loss


def main(args):
    dm = get_datamodule(args, "discover")
    model = Discoverer(**args.__dict__)
    trainer = pl.Trainer.from_argparse_args(args)
    trainer.fit(model, dm)


if __name__ == "__main__":
    parser = pl.Trainer.add_argparse_args(parser)
    main(parser.parse_args())
