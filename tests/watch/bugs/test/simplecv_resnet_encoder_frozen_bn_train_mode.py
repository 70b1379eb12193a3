"""A config-driven ResNetEncoder for segmentation with batchnorm_trainable=False: in __init__ it
sets requires_grad=False on every BatchNorm parameter and calls eval() on the BatchNorm layers
(plus freeze_at=2 for the stem and first stage). The Launcher's train_iters calls
self._model.train() at every iteration, which flips those layers back to training mode: the
"frozen" pretrained BatchNorms normalise with the statistics of small batches and keep overwriting
their running_mean / running_var with the new data. The encoder has no train() override.

Thread: https://github.com/Z-Zheng/SimpleCV/pull/61
"""
import torch
import torch.nn.functional as F
from torch import nn


def freeze_params(module):
    for p in module.parameters():
        p.requires_grad = False


def conv_bn(cin, cout, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())


class ResNetEncoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.resnet = nn.ModuleDict(dict(conv1=conv_bn(3, 16), layer1=conv_bn(16, 16),
                                         layer2=conv_bn(16, 32, 2), layer3=conv_bn(32, 32)))
        if not self.config["batchnorm_trainable"]:
            self._frozen_res_bn()
        self._freeze_at(at=self.config["freeze_at"])

    def _frozen_res_bn(self):
        for m in self.resnet.modules():
            if isinstance(m, nn.BatchNorm2d):
                freeze_params(m)
                m.eval()

    def _freeze_at(self, at=2):
        if at >= 1:
            freeze_params(self.resnet["conv1"])
        if at >= 2:
            freeze_params(self.resnet["layer1"])

    def forward(self, x):
        for name in ("conv1", "layer1", "layer2", "layer3"):
            x = self.resnet[name](x)
        return x


class SegModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.en = ResNetEncoder(config)
        self.cls = nn.Conv2d(32, 3, 1)

    def forward(self, x, y=None):
        logit = F.interpolate(self.cls(self.en(x)), scale_factor=2, mode="bilinear", align_corners=False)
        return {"cls_loss": F.cross_entropy(logit, y)} if self.training else logit


class Launcher:
    def __init__(self, model, optimizer, base_lr, max_iters):
        self._model, self._optimizer, self.base_lr, self.max_iters = model, optimizer, base_lr, max_iters
        self.global_step = 0

    def compute_loss_gradient(self, data):
        x, y = data
        loss_dict = self._model(x, y)
        loss = sum(loss_dict.values())
        loss.backward()
        return {k: v.item() for k, v in loss_dict.items()}

    def apply_gradient(self):
        self._optimizer.step()
        self._optimizer.zero_grad()
        self.global_step += 1
        for group in self._optimizer.param_groups:  # poly schedule
            group["lr"] = self.base_lr * (1 - self.global_step / self.max_iters) ** 0.9

    def train_iters(self, loader):
        while self.global_step < self.max_iters:
            data = loader[self.global_step % len(loader)]
            self._model.train()
            loss_dict = self.compute_loss_gradient(data)
            torch.nn.utils.clip_grad_norm_(filter(lambda p: p.requires_grad, self._model.parameters()), 35)
            self.apply_gradient()
            if self.global_step % 20 == 0:
                print(f"step {self.global_step} {loss_dict}")


def image_batches(n, batch_size, seed, shift=0.0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        y = torch.randint(0, 3, (batch_size, 1, 4, 4), generator=g)
        y = F.interpolate(y.float(), size=16).long().squeeze(1)
        x = F.one_hot(y, 3).permute(0, 3, 1, 2).float() + 0.7 * torch.randn(batch_size, 3, 16, 16, generator=g)
        out.append((x * scale + shift, y))
    return out


def load_pretrained_statistics(model):
    # stands in for the ImageNet checkpoint: running statistics of the source domain
    bns = [m for m in model.en.modules() if isinstance(m, nn.BatchNorm2d)]
    for m in bns:
        m.train()
        m.momentum = None
    with torch.no_grad():
        for x, _ in image_batches(10, 64, seed=9):
            model.en(x)
    for m in bns:
        m.momentum = 0.1
        m.eval()


def main():
    torch.manual_seed(0)
    model = SegModel(dict(batchnorm_trainable=False, freeze_at=2))
    load_pretrained_statistics(model)
    bn = model.en.resnet["conv1"][1]
    before = bn.running_mean.clone()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    Launcher(model, optimizer, base_lr=0.01, max_iters=80).train_iters(image_batches(20, 4, seed=0, shift=0.8, scale=1.6))
    print(f"frozen BatchNorm running_mean moved by {(bn.running_mean - before).abs().mean():.3f}")


if __name__ == "__main__":
    main()
