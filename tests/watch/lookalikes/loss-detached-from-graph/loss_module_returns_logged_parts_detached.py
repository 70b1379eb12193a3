"""A detection-style criterion, DetectionLoss (an nn.Module), returns a dict: the total loss with
its graph under "loss", and the classification and box terms detached under "cls" and "box" for
the log. The training loop backpropagates the total. Every few steps the loop also scores the
detached predictions with the same criterion to log a number (its inputs carry no graph there).
Nothing that trains is cut: a loss module that returns a graph-carrying value beside logged
floats, or that is handed detached inputs, is not the mistake."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class DetectionLoss(nn.Module):
    def __init__(self, box_weight=2.0):
        super().__init__()
        self.box_weight = box_weight

    def forward(self, cls_logits, boxes, labels, target_boxes):
        cls = F.cross_entropy(cls_logits, labels)
        box = F.smooth_l1_loss(boxes, target_boxes)
        total = cls + self.box_weight * box
        return {"loss": total, "cls": cls.detach(), "box": box.detach()}


class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(24, 64), nn.ReLU())
        self.cls_head, self.box_head = nn.Linear(64, 5), nn.Linear(64, 4)

    def forward(self, x):
        h = self.trunk(x)
        return self.cls_head(h), self.box_head(h)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(640, 24, generator=g)
    labels = x[:, :5].argmax(1)
    target_boxes = x[:, 5:9] * 0.5
    loader = DataLoader(TensorDataset(x, labels, target_boxes), batch_size=32, shuffle=True, generator=g)
    model, criterion = Detector(), DetectionLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(3):
        for step, (xb, yb, bb) in enumerate(loader):
            cls_logits, boxes = model(xb)
            out = criterion(cls_logits, boxes, yb, bb)
            optimizer.zero_grad()
            out["loss"].backward()
            optimizer.step()
            if step % 5 == 0:
                logged = criterion(cls_logits.detach(), boxes.detach(), yb, bb)
        print(f"epoch {epoch} cls {out['cls'].item():.4f} box {out['box'].item():.4f} "
              f"logged {logged['loss'].item():.4f}")


if __name__ == "__main__":
    main()
