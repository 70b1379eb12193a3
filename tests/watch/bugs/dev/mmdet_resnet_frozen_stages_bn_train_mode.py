"""A detector-style ResNet backbone with frozen_stages and norm_eval options: _freeze_stages() puts
the stem and the first stages in eval mode and sets requires_grad=False on their parameters, and
an overridden train(mode) calls super().train(mode) and then, only when norm_eval is set, puts the
BatchNorm layers back in eval. With norm_eval=False, every model.train() at the start of an epoch
switches the frozen stages' BatchNorm layers back to training mode: their weights stay fixed, but
their running statistics are overwritten by the new data's batches, so the "frozen" features
drift from the pretrained ones.

Thread: https://github.com/open-mmlab/mmdetection/pull/560
"""
import torch
import torch.nn.functional as F
from torch import nn


def conv_bn(cin, cout, stride):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class ResNet(nn.Module):
    def __init__(self, frozen_stages=-1, norm_eval=True):
        super().__init__()
        self.frozen_stages, self.norm_eval = frozen_stages, norm_eval
        self.stem = conv_bn(3, 16, 1)
        self.res_layers = nn.ModuleList([conv_bn(16, 16, 1), conv_bn(16, 32, 2), conv_bn(32, 64, 2)])
        self._freeze_stages()

    def _freeze_stages(self):
        if self.frozen_stages >= 0:
            self.stem.eval()
            for param in self.stem.parameters():
                param.requires_grad = False
        for i in range(self.frozen_stages):
            m = self.res_layers[i]
            m.eval()
            for param in m.parameters():
                param.requires_grad = False

    def forward(self, x):
        outs = []
        x = self.stem(x)
        for layer in self.res_layers:
            x = layer(x)
            outs.append(x)
        return outs

    def train(self, mode=True):
        super().train(mode)
        if mode and self.norm_eval:
            for m in self.modules():
                if isinstance(m, nn.BatchNorm2d):
                    m.eval()
        return self


class SingleStageDetector(nn.Module):
    def __init__(self, backbone, num_classes=4):
        super().__init__()
        self.backbone = backbone
        self.cls_head = nn.Conv2d(64, num_classes, 1)
        self.reg_head = nn.Conv2d(64, 4, 1)

    def forward_train(self, img, gt_labels, gt_boxes):
        feat = self.backbone(img)[-1]
        cls_score = self.cls_head(feat).mean(dim=(2, 3))
        bbox_pred = self.reg_head(feat).mean(dim=(2, 3))
        return {"loss_cls": F.cross_entropy(cls_score, gt_labels), "loss_bbox": F.l1_loss(bbox_pred, gt_boxes)}


def scenes(n, seed, brightness, contrast):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 4, (n,), generator=g)
    protos = torch.randn(4, 3, 16, 16, generator=torch.Generator().manual_seed(5))
    img = brightness + contrast * (protos[labels] + 0.7 * torch.randn(n, 3, 16, 16, generator=g))
    boxes = torch.rand(n, 4, generator=g)
    return img, labels, boxes


def pretrain_backbone(backbone):
    """Stands in for loading ImageNet weights: the BN statistics come from the source domain."""
    head = nn.Linear(64, 4)
    opt = torch.optim.SGD(list(backbone.parameters()) + list(head.parameters()), lr=0.05, momentum=0.9)
    img, labels, _ = scenes(1024, seed=10, brightness=0.0, contrast=1.0)
    backbone.train()
    for i in range(0, 1024, 64):
        loss = F.cross_entropy(head(backbone(img[i:i + 64])[-1].mean(dim=(2, 3))), labels[i:i + 64])
        opt.zero_grad()
        loss.backward()
        opt.step()


def main():
    torch.manual_seed(0)
    backbone = ResNet(frozen_stages=-1)
    pretrain_backbone(backbone)
    backbone.frozen_stages, backbone.norm_eval = 1, False
    backbone._freeze_stages()
    model = SingleStageDetector(backbone)
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.02, momentum=0.9,
                                weight_decay=1e-4)
    stem_bn = backbone.stem[1]
    pretrained_mean = stem_bn.running_mean.clone()
    img, labels, boxes = scenes(1280, seed=0, brightness=1.5, contrast=2.0)
    for epoch in range(3):
        model.train()
        for it, i in enumerate(range(0, len(img), 64)):
            losses = model.forward_train(img[i:i + 64], labels[i:i + 64], boxes[i:i + 64])
            loss = sum(losses.values())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if it % 10 == 0:
                print(f"Epoch [{epoch}][{it}] loss_cls {losses['loss_cls'].item():.4f} "
                      f"loss_bbox {losses['loss_bbox'].item():.4f}")
        drift = (stem_bn.running_mean - pretrained_mean).abs().mean().item()
        print(f"epoch {epoch}: frozen stem BN training={stem_bn.training}, "
              f"weight requires_grad={stem_bn.weight.requires_grad}, running_mean drift {drift:.4f}")


if __name__ == "__main__":
    main()
