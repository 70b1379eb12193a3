"""Fine-tuning a pretrained CNN backbone with a Lightning-style Trainer and a BackboneFinetuning
callback subclass whose freeze_before_training calls self.freeze(pl_module.backbone, train_bn=False).
BaseFinetuning.freeze only sets requires_grad=False on the parameters, BatchNorm weights included,
while the trainer puts the whole module in train() mode every epoch: the frozen BatchNorm layers
keep normalising with batch statistics and keep overwriting their running_mean / running_var with
the new data's batches. The "frozen" backbone gives different eval() outputs after training.

Thread: https://github.com/Lightning-AI/pytorch-lightning/pull/15063
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm


class BaseFinetuning:
    @staticmethod
    def freeze(modules, train_bn=True):
        for module in modules.modules():
            if isinstance(module, _BatchNorm) and train_bn:
                continue
            for param in module.parameters(recurse=False):
                param.requires_grad = False

    def setup(self, trainer, pl_module):
        self.freeze_before_training(pl_module)

    def on_train_epoch_start(self, trainer, pl_module):
        pass


class BackboneFinetuning(BaseFinetuning):
    def __init__(self, unfreeze_backbone_at_epoch=10):
        self.unfreeze_backbone_at_epoch = unfreeze_backbone_at_epoch

    def freeze_before_training(self, pl_module):
        self.freeze(pl_module.backbone)

    def on_train_epoch_start(self, trainer, pl_module):
        if trainer.current_epoch == self.unfreeze_backbone_at_epoch:
            for p in pl_module.backbone.parameters():
                p.requires_grad = True
            trainer.optimizer.add_param_group({"params": list(pl_module.backbone.parameters()), "lr": 1e-4})


class CustomBackboneFineTuning(BackboneFinetuning):
    def freeze_before_training(self, pl_module):
        self.freeze(pl_module.backbone, train_bn=False)


class Trainer:
    def __init__(self, max_epochs, callbacks=()):
        self.max_epochs, self.callbacks, self.current_epoch = max_epochs, list(callbacks), 0

    def fit(self, model, train_dataloader, val_dataloader):
        for cb in self.callbacks:
            cb.setup(self, model)
        self.optimizer = model.configure_optimizers()
        for self.current_epoch in range(self.max_epochs):
            for cb in self.callbacks:
                cb.on_train_epoch_start(self, model)
            model.train()
            for batch_idx, batch in enumerate(train_dataloader):
                loss = model.training_step(batch, batch_idx)
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()
            model.eval()
            with torch.no_grad():
                acc = torch.stack([model.validation_step(b, i) for i, b in enumerate(val_dataloader)]).mean()
            print(f"epoch {self.current_epoch} train_loss {loss.item():.4f} val_acc {acc:.3f}")


class LitClassifier(nn.Module):
    def __init__(self, num_classes=5):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.head(self.backbone(x))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        return (self(x).argmax(1) == y).float().mean()

    def configure_optimizers(self):
        return torch.optim.Adam(filter(lambda p: p.requires_grad, self.parameters()), lr=3e-3)


def image_batches(n_batches, batch_size, seed, shift=0.0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(5, 3, 8, 8, generator=torch.Generator().manual_seed(3))
    out = []
    for _ in range(n_batches):
        y = torch.randint(0, 5, (batch_size,), generator=g)
        x = F.interpolate(protos[y], size=16) + 0.8 * torch.randn(batch_size, 3, 16, 16, generator=g)
        out.append((x * scale + shift, y))
    return out


def load_pretrained_backbone(model):
    # stands in for loading an ImageNet checkpoint: BatchNorm statistics of the source domain
    for m in model.backbone.modules():
        if isinstance(m, _BatchNorm):
            m.momentum = None
    model.train()
    with torch.no_grad():
        for x, _ in image_batches(20, 64, seed=9):
            model.backbone(x)
    for m in model.backbone.modules():
        if isinstance(m, _BatchNorm):
            m.momentum = 0.1


def main():
    torch.manual_seed(0)
    model = LitClassifier()
    load_pretrained_backbone(model)
    bn = model.backbone[1]
    before = bn.running_mean.clone()
    train = image_batches(40, 16, seed=0, shift=0.5, scale=1.5)
    val = image_batches(10, 64, seed=1, shift=0.5, scale=1.5)
    Trainer(max_epochs=3, callbacks=[CustomBackboneFineTuning()]).fit(model, train, val)
    print(f"frozen backbone BatchNorm running_mean moved by {(bn.running_mean - before).abs().mean():.3f}")


if __name__ == "__main__":
    main()
