"""A YOLO-style detector in which the detection layer computes its own loss inside forward(x,
targets): MSE on the box offsets and sizes of the cells that hold an object, BCE on objectness for
object and no-object cells, and cross entropy on the class of the object cells, all summed into one
total; a script-level loop runs zero_grad / loss = model(imgs, targets) / backward / step with Adam.
The class term is multiplied by 1 / batch_size on top of CrossEntropyLoss's own mean, so it is
averaged twice and enters the total 16 times weaker than the box and objectness terms.

Thread: https://github.com/eriklindernoren/PyTorch-YOLOv3/pull/137
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

NUM_CLASSES = 5
GRID = 4
CELL = 8


class DetectionLayer(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.num_classes = num_classes
        self.mse_loss = nn.MSELoss()
        self.bce_loss = nn.BCELoss()
        self.ce_loss = nn.CrossEntropyLoss()
        self.losses = {}

    def forward(self, p, targets=None):
        nB = p.size(0)
        p = p.permute(0, 2, 3, 1).contiguous()
        x, y = torch.sigmoid(p[..., 0]), torch.sigmoid(p[..., 1])
        w, h = p[..., 2], p[..., 3]
        conf = torch.sigmoid(p[..., 4])
        cls_logits = p[..., 5:]
        if targets is None:
            return torch.cat([torch.stack([x, y, w, h, conf], -1), cls_logits.softmax(-1)], -1)
        obj, tx, ty, tw, th, tcls = targets
        mask = obj.bool()
        noobj = ~mask
        loss_x = self.mse_loss(x[mask], tx[mask])
        loss_y = self.mse_loss(y[mask], ty[mask])
        loss_w = self.mse_loss(w[mask], tw[mask])
        loss_h = self.mse_loss(h[mask], th[mask])
        loss_conf = self.bce_loss(conf[noobj], obj[noobj]) + self.bce_loss(conf[mask], obj[mask])
        loss_cls = (1 / nB) * self.ce_loss(cls_logits[mask], tcls[mask])
        loss = loss_x + loss_y + loss_w + loss_h + loss_conf + loss_cls
        self.losses = {"x": loss_x.item(), "y": loss_y.item(), "w": loss_w.item(), "h": loss_h.item(),
                       "conf": loss_conf.item(), "cls": loss_cls.item()}
        return loss


class TinyDarknet(nn.Module):
    def __init__(self, num_classes=NUM_CLASSES):
        super().__init__()

        def block(cin, cout, stride):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout),
                                 nn.LeakyReLU(0.1))

        self.backbone = nn.Sequential(block(3, 16, 1), block(16, 32, 2), block(32, 64, 2), block(64, 64, 2))
        self.head = nn.Conv2d(64, 5 + num_classes, 1)
        self.yolo = DetectionLayer(num_classes)

    def forward(self, imgs, targets=None):
        return self.yolo(self.head(self.backbone(imgs)), targets)


def scenes(n, seed):
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(NUM_CLASSES, 3, CELL, CELL, generator=torch.Generator().manual_seed(11))
    imgs = 0.5 * torch.randn(n, 3, GRID * CELL, GRID * CELL, generator=g)
    obj = torch.zeros(n, GRID, GRID)
    tx, ty, tw, th = (torch.zeros(n, GRID, GRID) for _ in range(4))
    tcls = torch.zeros(n, GRID, GRID, dtype=torch.long)
    cls = torch.randint(0, NUM_CLASSES, (n,), generator=g)
    gi = torch.randint(0, GRID, (n,), generator=g)
    gj = torch.randint(0, GRID, (n,), generator=g)
    offs = torch.rand(n, 2, generator=g)
    sizes = torch.rand(n, 2, generator=g) * 2 - 1
    for k in range(n):
        j, i = gj[k].item(), gi[k].item()
        patch = protos[cls[k]].clone()
        patch[0] += offs[k, 0] - 0.5
        patch[1] += offs[k, 1] - 0.5
        patch[2] += 0.5 * sizes[k, 0] + 0.25 * sizes[k, 1]
        imgs[k, :, j * CELL:(j + 1) * CELL, i * CELL:(i + 1) * CELL] += patch
        obj[k, j, i] = 1.0
        tx[k, j, i], ty[k, j, i] = offs[k, 0], offs[k, 1]
        tw[k, j, i], th[k, j, i] = sizes[k, 0], sizes[k, 1]
        tcls[k, j, i] = cls[k]
    return TensorDataset(imgs, obj, tx, ty, tw, th, tcls)


def main():
    torch.manual_seed(0)
    model = TinyDarknet()
    model.train()
    dataloader = DataLoader(scenes(1024, 0), batch_size=16, shuffle=True,
                            generator=torch.Generator().manual_seed(0))
    optimizer = torch.optim.Adam(filter(lambda p: p.requires_grad, model.parameters()))
    for epoch in range(2):
        for batch_i, (imgs, *targets) in enumerate(dataloader):
            optimizer.zero_grad()
            loss = model(imgs, targets)
            loss.backward()
            optimizer.step()
            if batch_i % 16 == 0:
                l = model.yolo.losses
                print(f"[epoch {epoch} batch {batch_i}/{len(dataloader)}] x {l['x']:.3f} y {l['y']:.3f} "
                      f"w {l['w']:.3f} h {l['h']:.3f} conf {l['conf']:.3f} cls {l['cls']:.4f} "
                      f"total {loss.item():.3f}")


if __name__ == "__main__":
    main()
