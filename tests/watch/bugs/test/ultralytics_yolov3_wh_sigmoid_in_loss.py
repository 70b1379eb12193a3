"""A single-scale YOLOv3-style detector trainer in the ultralytics/yolov3 (2019) shape: a
YOLOLayer that returns the raw (bs, anchors, grid, grid, 5 + classes) map in training and
decodes it in inference (xy = sigmoid + grid offset, wh = exp(raw) * anchor), a
build_targets(model, targets) that assigns each ground-truth box to its best anchor and cell
and encodes the size as twh = log(gwh / anchor), a compute_loss(p, targets) summing weighted
xy MSE, wh MSE, class cross-entropy and objectness BCE-with-logits, and a plain epoch / batch
loop with Adam that prints the loss terms and, on held-out images, the IoU of the box each
ground truth's responsible anchor predicts. compute_loss passes the width/height outputs through torch.sigmoid before the
MSE against the log-ratio targets: the training head can only produce values in (0, 1), so
boxes smaller than their anchor (negative targets) can never be fitted, and the raw value it
learns is decoded at inference by exp(), not by sigmoid, so every predicted box comes out
the wrong size. The loss falls and the class head learns, but the decoded boxes
miss their objects.

Thread: https://github.com/ultralytics/yolov3/issues/202
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

IMG = 64
STRIDE = 8
NG = IMG // STRIDE
NC = 2
ANCHORS = [(1.0, 1.0), (2.5, 2.5), (4.0, 4.0)]  # in grid units


class YOLOLayer(nn.Module):
    def __init__(self, anchors, nC):
        super().__init__()
        self.anchor_vec = torch.tensor(anchors)
        self.nA = len(anchors)
        self.nC = nC
        self.nG = NG
        yv, xv = torch.meshgrid(torch.arange(NG), torch.arange(NG), indexing="ij")
        self.grid_xy = torch.stack((xv, yv), 2).view(1, 1, NG, NG, 2).float()
        self.anchor_wh = self.anchor_vec.view(1, self.nA, 1, 1, 2)

    def forward(self, p):
        bs = p.shape[0]
        p = p.view(bs, self.nA, self.nC + 5, NG, NG).permute(0, 1, 3, 4, 2).contiguous()
        if self.training:
            return p
        io = p.clone()
        io[..., 0:2] = torch.sigmoid(io[..., 0:2]) + self.grid_xy
        io[..., 2:4] = torch.exp(io[..., 2:4]) * self.anchor_wh
        io[..., 4:] = torch.sigmoid(io[..., 4:])
        io[..., :4] *= STRIDE
        return io


class Darknet(nn.Module):
    def __init__(self):
        super().__init__()
        def conv(cin, cout, s):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, s, 1, bias=False), nn.BatchNorm2d(cout),
                                 nn.LeakyReLU(0.1))
        self.backbone = nn.Sequential(conv(3, 16, 1), conv(16, 32, 2), conv(32, 32, 1), conv(32, 64, 2),
                                      conv(64, 64, 1), conv(64, 64, 2), conv(64, 64, 1))
        self.head = nn.Conv2d(64, len(ANCHORS) * (NC + 5), 1)
        self.yolo = YOLOLayer(ANCHORS, NC)
        self.module_list = [self.yolo]

    def forward(self, x):
        return [self.yolo(self.head(self.backbone(x)))]


def wh_iou(box1, box2):
    inter = torch.min(box1[0], box2[:, 0]) * torch.min(box1[1], box2[:, 1])
    return inter / (box1[0] * box1[1] + box2[:, 0] * box2[:, 1] - inter)


def build_targets(model, targets):
    # targets = [image, class, x, y, w, h], normalised to 0-1
    txy, twh, tcls, indices = [], [], [], []
    for layer in model.module_list:
        gwh = targets[:, 4:6] * layer.nG
        iou = torch.stack([wh_iou(a, gwh) for a in layer.anchor_vec], 0)
        iou, a = iou.max(0)
        b, c = targets[:, :2].long().t()
        gxy = targets[:, 2:4] * layer.nG
        gi, gj = gxy.long().t()
        indices.append((b, a, gj, gi))
        txy.append(gxy - gxy.floor())
        twh.append(torch.log(gwh / layer.anchor_vec[a]))
        tcls.append(c)
    return txy, twh, tcls, indices


def compute_loss(p, targets):
    lxy, lwh, lcls, lconf = (torch.zeros(1) for _ in range(4))
    txy, twh, tcls, indices = targets
    MSE, CE, BCE = nn.MSELoss(), nn.CrossEntropyLoss(), nn.BCEWithLogitsLoss()
    for i, pi0 in enumerate(p):
        b, a, gj, gi = indices[i]
        tconf = torch.zeros_like(pi0[..., 0])
        if len(b) > 0:
            pi = pi0[b, a, gj, gi]
            tconf[b, a, gj, gi] = 1
            lxy = lxy + 8 * MSE(torch.sigmoid(pi[..., 0:2]), txy[i])
            lwh = lwh + 4 * MSE(torch.sigmoid(pi[..., 2:4]), twh[i])  # wh yolo loss
            lcls = lcls + CE(pi[..., 5:], tcls[i])
        lconf = lconf + 64 * BCE(pi0[..., 4], tconf)
    loss = lxy + lwh + lconf + lcls
    return loss, dict(xy=lxy.item(), wh=lwh.item(), conf=lconf.item(), cls=lcls.item())


def make_data(n, gen):
    imgs = 0.2 * torch.randn(n, 3, IMG, IMG, generator=gen)
    rows = []
    for i in range(n):
        taken = set()
        for _ in range(int(torch.randint(1, 4, (1,), generator=gen))):
            w, h = (torch.randint(5, 36, (2,), generator=gen)).tolist()
            x0 = int(torch.randint(0, IMG - w, (1,), generator=gen))
            y0 = int(torch.randint(0, IMG - h, (1,), generator=gen))
            cx, cy = x0 + w / 2, y0 + h / 2
            cell = (int(cx // STRIDE), int(cy // STRIDE))
            if cell in taken:
                continue
            taken.add(cell)
            c = int(torch.randint(0, NC, (1,), generator=gen))
            imgs[i, c, y0:y0 + h, x0:x0 + w] += 1.0
            imgs[i, 2, y0:y0 + h, x0:x0 + w] += 0.5
            rows.append([i, c, cx / IMG, cy / IMG, w / IMG, h / IMG])
    return imgs, torch.tensor(rows)


def box_iou_xywh(a, b):
    a1, a2 = a[:, None, :2] - a[:, None, 2:] / 2, a[:, None, :2] + a[:, None, 2:] / 2
    b1, b2 = b[None, :, :2] - b[None, :, 2:] / 2, b[None, :, :2] + b[None, :, 2:] / 2
    inter = (torch.min(a2, b2) - torch.max(a1, b1)).clamp(min=0).prod(-1)
    return inter / (a[:, None, 2:].prod(-1) + b[None, :, 2:].prod(-1) - inter)


@torch.no_grad()
def test(model, imgs, targets):
    """Decode the prediction of each ground truth's responsible anchor and cell."""
    model.eval()
    io = model(imgs)[0]
    _, _, tcls, indices = build_targets(model, targets)
    b, a, gj, gi = indices[0]
    det = io[b, a, gj, gi]
    iou = box_iou_xywh(targets[:, 2:6] * IMG, det[:, :4]).diagonal()
    cls_ok = (det[:, 5:].argmax(1) == tcls[0]).float().mean().item()
    model.train()
    return iou.mean().item(), (iou > 0.5).float().mean().item(), cls_ok


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    train_imgs, train_t = make_data(256, gen)
    val_imgs, val_t = make_data(64, gen)
    model = Darknet()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    bs = 16
    for epoch in range(10):
        model.train()
        perm = torch.randperm(len(train_imgs), generator=gen)
        for k in range(0, len(perm), bs):
            idx = perm[k:k + bs]
            imgs = train_imgs[idx]
            sel = (train_t[:, 0:1] == idx[None, :]).nonzero()
            targets = train_t[sel[:, 0]].clone()
            targets[:, 0] = sel[:, 1].float()
            pred = model(imgs)
            loss, d = compute_loss(pred, build_targets(model, targets))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        miou, r50, acc = test(model, val_imgs, val_t)
        print(f"epoch {epoch}  loss {loss.item():.3f} (xy {d['xy']:.3f} wh {d['wh']:.3f} "
              f"conf {d['conf']:.3f} cls {d['cls']:.3f})  val box IoU {miou:.3f} "
              f"IoU>0.5 {r50:.3f} class acc {acc:.3f}")


if __name__ == "__main__":
    main()
