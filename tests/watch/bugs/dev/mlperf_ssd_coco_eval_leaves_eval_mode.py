"""An SSD-style single-shot detector trained by a reference-benchmark script: a ResNet-like backbone
with BatchNorm feeds per-level loc/conf convolution heads whose outputs are viewed as
(N, 4, anchors) and (N, labels, anchors); a Loss module combines smooth-L1 on the matched anchors
with cross entropy over the positive anchors and the hardest 3x as many negatives. train300()
builds SGD(momentum 0.9, weight decay 5e-4), calls model.train() once before the loop, runs
zero_grad / backward / step per batch, and at the iterations listed in `evaluation` calls
coco_eval(model, ...), which switches the model to eval() to score the validation images one at a
time and returns whether the AP target was reached. It never puts the model back into training
mode, so every iteration after the first evaluation trains with BatchNorm in eval mode: the running
statistics stop updating and the batch statistics are no longer used.

Thread: https://github.com/mlcommons/training/pull/144
"""
import torch
import torch.nn.functional as F
from torch import nn

NUM_LABELS = 4  # background + 3 classes
IMG = 32


def conv_bn(cin, cout, stride):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class SSD300(nn.Module):
    def __init__(self, label_num=NUM_LABELS):
        super().__init__()
        self.label_num = label_num
        self.model = nn.Sequential(conv_bn(3, 16, 1), conv_bn(16, 32, 2), conv_bn(32, 32, 1), conv_bn(32, 64, 2))
        self.additional_blocks = nn.ModuleList([conv_bn(64, 64, 2)])
        self.num_defaults = [1, 1]
        self.loc = nn.ModuleList([nn.Conv2d(c, nd * 4, 3, padding=1) for c, nd in zip([64, 64], self.num_defaults)])
        self.conf = nn.ModuleList([nn.Conv2d(c, nd * label_num, 3, padding=1)
                                   for c, nd in zip([64, 64], self.num_defaults)])

    def bbox_view(self, src, loc, conf):
        ret = [(l(s).view(s.size(0), 4, -1), c(s).view(s.size(0), self.label_num, -1)) for s, l, c in zip(src, loc, conf)]
        locs, confs = zip(*ret)
        return torch.cat(locs, 2).contiguous(), torch.cat(confs, 2).contiguous()

    def forward(self, data):
        x = self.model(data)
        src = [x]
        for block in self.additional_blocks:
            x = block(x)
            src.append(x)
        return self.bbox_view(src, self.loc, self.conf)


class Loss(nn.Module):
    """Smooth-L1 on positive anchors plus cross entropy with 3:1 hard negative mining."""

    def forward(self, ploc, plabel, gloc, glabel):
        mask = glabel > 0
        pos_num = mask.sum(dim=1)
        loc_loss = F.smooth_l1_loss(ploc, gloc, reduction="none").sum(dim=1)
        loc_loss = (mask.float() * loc_loss).sum(dim=1)
        con = F.cross_entropy(plabel, glabel, reduction="none")
        con_neg = con.clone()
        con_neg[mask] = 0
        _, con_idx = con_neg.sort(dim=1, descending=True)
        _, con_rank = con_idx.sort(dim=1)
        neg_mask = con_rank < (3 * pos_num).clamp(max=mask.size(1)).unsqueeze(-1)
        con_loss = (con * (mask.float() + neg_mask.float())).sum(dim=1)
        return ((loc_loss + con_loss) / pos_num.float().clamp(min=1e-6)).mean()


def make_coco(n, seed):
    """One object per image, centred on one cell of the 8x8 level; targets already encoded per anchor."""
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(3, 3, 4, 4, generator=torch.Generator().manual_seed(3))
    img = 0.8 * torch.randn(n, 3, IMG, IMG, generator=g) + 0.5
    gloc = torch.zeros(n, 4, 64 + 16)
    glabel = torch.zeros(n, 64 + 16, dtype=torch.long)
    cls = torch.randint(0, 3, (n,), generator=g)
    cell = torch.randint(0, 64, (n,), generator=g)
    offs = torch.rand(n, 4, generator=g) - 0.5
    for k in range(n):
        r, c = divmod(int(cell[k]), 8)
        img[k, :, 4 * r:4 * r + 4, 4 * c:4 * c + 4] += 2.0 * protos[cls[k]] + 2.0 * offs[k, :3, None, None]
        glabel[k, cell[k]] = cls[k] + 1
        gloc[k, :, cell[k]] = torch.cat([offs[k, :3], -offs[k, :1]])
    return img, gloc, glabel


def coco_eval(model, val_img, val_gloc, val_glabel, threshold):
    model.eval()
    correct = 0
    for idx in range(len(val_img)):
        with torch.no_grad():
            ploc, plabel = model(val_img[idx:idx + 1])
        obj = val_glabel[idx].nonzero()[0, 0]
        loc_err = (ploc[0, :, obj] - val_gloc[idx, :, obj]).abs().max()
        correct += int(plabel[0, :, obj].argmax() == val_glabel[idx, obj] and loc_err < 0.15)
    ap = correct / len(val_img)
    print(f"Current AP: {ap:.5f} AP goal: {threshold:.5f}")
    return ap >= threshold


def train300(epochs=4, batch_size=32, evaluation=(60, 80, 90, 100, 110, 120), threshold=0.99):
    torch.manual_seed(0)
    img, gloc, glabel = make_coco(1024, seed=0)
    val_img, val_gloc, val_glabel = make_coco(96, seed=1)
    ssd300 = SSD300()
    ssd300.train()
    loss_func = Loss()
    optim = torch.optim.SGD(ssd300.parameters(), lr=5e-3, momentum=0.9, weight_decay=5e-4)
    iter_num, avg_loss = 0, 0.0
    g = torch.Generator().manual_seed(0)
    for epoch in range(epochs):
        perm = torch.randperm(len(img), generator=g)
        for nbatch in range(len(img) // batch_size):
            idx = perm[nbatch * batch_size:(nbatch + 1) * batch_size]
            ploc, plabel = ssd300(img[idx])
            loss = loss_func(ploc, plabel, gloc[idx], glabel[idx])
            avg_loss = 0.9 * avg_loss + 0.1 * loss.item()
            if iter_num % 10 == 0:
                print(f"Iteration: {iter_num:6d}, Loss function: {loss.item():5.3f}, Average Loss: {avg_loss:.3f}")
            optim.zero_grad()
            loss.backward()
            optim.step()
            if iter_num in evaluation:
                if coco_eval(ssd300, val_img, val_gloc, val_glabel, threshold):
                    return
            iter_num += 1


if __name__ == "__main__":
    train300()
