"""
Shape: nn.Module attribute classifier over a torchvision ResNet backbone (model_type switch), a manual trunk() pass through the ResNet stages, forward(imgs, attrs=None) that returns logits or a per-attribute weighted BCEWithLogitsLoss, plus an adaptive loss-weight update run on validation batches.
Bug: dropout is applied as nn.Dropout(0.5)(x), a module built on the fly inside forward, so model.eval() never turns it off.
Thread: https://github.com/ewrfcas/face_attribute_classification_pytorch/issues/1
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision import models


class FaceAttrNet(nn.Module):
    def __init__(self, hp, device):
        super(FaceAttrNet, self).__init__()
        if hp.model_type == 'resnet50':
            self.backbone = models.resnet50(pretrained=True)
            feat_dim = 2048
        elif hp.model_type == 'resnet34':
            self.backbone = models.resnet34(pretrained=True)
            feat_dim = 512
        elif hp.model_type == 'resnet18':
            self.backbone = models.resnet18(pretrained=True)
            feat_dim = 512
        else:
            raise NotImplementedError
        self.att_weights = torch.ones((40,), device=device)
        self.window = hp.window if hasattr(hp, 'k') else -1
        self.val_hist = []
        self.fc = nn.Linear(feat_dim, 40)

    def trunk(self, x):
        b = self.backbone
        x = b.maxpool(b.relu(b.bn1(b.conv1(x))))
        x = b.layer4(b.layer3(b.layer2(b.layer1(x))))
        return b.avgpool(x)

    def forward(self, imgs, attrs=None):
        h = torch.flatten(self.backbone_forward(imgs), 1)
        h = nn.Dropout(0.5)(h)
        logits = self.fc(h)
        if attrs is None:
            return logits
        bce_each = nn.BCEWithLogitsLoss(reduction='none')(input=logits, target=attrs)
        weighted = torch.sum(bce_each * self.att_weights.unsqueeze(0), dim=1)
        return torch.mean(weighted)

    def reweight_attributes(self, v_imgs, v_lbls, step, eps=1e-8):
        h = torch.flatten(self.backbone_forward(v_imgs), 1)
        logits = self.fc(h)
        loss = torch.mean(nn.BCEWithLogitsLoss(reduction='none')(input=logits, target=v_lbls), dim=0)
        self.val_hist.append(loss)
        self.val_hist = self.val_hist[-(2 * self.window):]
        if step % self.window == 0 and len(self.val_hist) == 2 * self.window:
            hist = torch.cat([v.unsqueeze(0) for v in self.val_hist], dim=0)
            before = torch.mean(hist[:self.window, :], dim=0)
            now = torch.mean(hist[self.window:, :], dim=0)
            trend = torch.abs(now - before) / (now + eps)
            weights = (trend / (torch.mean(trend) + eps)) * (now / (torch.mean(now) + eps))
            self.att_weights = weights / (torch.mean(weights) + eps)
