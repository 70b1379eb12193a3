"""A CMOS-style multi-task estimator (stage 1 of a blind super-resolution pipeline): a shared conv
encoder feeds a blur-map branch and a segmentation branch, and a GIA spatial-interaction module
couples them with Swin-style window attention: window_partition cuts each (B, C, H, W) feature map
into windows, a conv plus a bmm between the two branches' window tokens gives a spatial affinity
that re-weights each window, and window_reverse stitches the windows back into a feature map. A
train_stage1(model, loader, optimizer, scheduler) helper minimises L1 on the blur map plus cross
entropy on the segmentation with Adam and a MultiStepLR; validate() reports both under eval().

window_reverse permutes the (num_windows*B, C, wh, ww) windows to channels-last into x, but the next
line views `windows` instead of `x`, so the permuted tensor is discarded and the channels-first
memory is read as if it were (B, nH, nW, wh, ww, C): every stitched pixel gets values from other
channels and positions of the window. Nothing errors; the maintainer's fix views x.

Thread: https://github.com/ByChelsea/CMOS/issues/4
"""
import torch
import torch.nn.functional as F
from torch import nn


def window_partition(x, window_size):
    B, C, H, W = x.shape
    x = x.permute(0, 2, 3, 1).contiguous()
    x = x.view(B, H // window_size[0], window_size[0], W // window_size[1], window_size[1], C)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, window_size[0], window_size[1], C)


def window_reverse(windows, window_size, H, W):
    B = int(windows.shape[0] / (H * W / window_size[0] / window_size[1]))
    x = windows.permute(0, 2, 3, 1).contiguous()
    x = windows.view(B, H // window_size[0], W // window_size[1], window_size[0], window_size[1], -1)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, H, W, -1).permute(0, 3, 1, 2).contiguous()


def conv_bn_relu(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class GIASpatial(nn.Module):
    def __init__(self, channels, win_size=(8, 8)):
        super().__init__()
        self.win_size = win_size
        self.s1, self.s2 = nn.Parameter(torch.zeros(1)), nn.Parameter(torch.zeros(1))
        self.conv_first1, self.conv_first2 = conv_bn_relu(channels, channels), conv_bn_relu(channels, channels)
        self.conv1, self.conv2 = nn.Conv2d(channels, 1, 1), nn.Conv2d(channels, 1, 1)
        self.conv_after1, self.conv_after2 = conv_bn_relu(channels, channels), conv_bn_relu(channels, channels)
        n = win_size[0] * win_size[1]
        self.conv_redu1, self.conv_redu2 = nn.Conv2d(n, 1, 1), nn.Conv2d(n, 1, 1)
        self.smooth1, self.smooth2 = conv_bn_relu(channels, channels), conv_bn_relu(channels, channels)

    def forward(self, x1, x2):
        feat1, feat2 = self.conv_first1(x1), self.conv_first2(x2)
        B, C, H, W = feat1.shape
        win1 = window_partition(feat1, self.win_size).permute(0, 3, 1, 2).contiguous()
        win2 = window_partition(feat2, self.win_size).permute(0, 3, 1, 2).contiguous()
        c1, c2 = self.conv_after1(win1), self.conv_after2(win2)
        b, c, h, w = c1.shape
        affinity = torch.bmm(c1.view(b, c, -1).permute(0, 2, 1), c2.view(b, c, -1))
        re1 = affinity.view(b, h, w, -1).permute(0, 3, 1, 2).contiguous()
        re2 = affinity.view(b, -1, h, w)
        re1 = torch.sigmoid(self.conv1(win1) + self.s1 * self.conv_redu1(re1))
        re2 = torch.sigmoid(self.conv2(win2) + self.s2 * self.conv_redu2(re2))
        feat1 = window_reverse(win1 * re1, self.win_size, H, W)
        feat2 = window_reverse(win2 * re2, self.win_size, H, W)
        return self.smooth1(feat1), self.smooth2(feat2)


class CMOS(nn.Module):
    def __init__(self, ch=16, num_classes=3):
        super().__init__()
        self.encoder = nn.Sequential(conv_bn_relu(3, ch), conv_bn_relu(ch, ch))
        self.blur_branch, self.seg_branch = conv_bn_relu(ch, ch), conv_bn_relu(ch, ch)
        self.spatial = GIASpatial(ch)
        self.blur_head = nn.Conv2d(2 * ch, 1, 3, padding=1)
        self.seg_head = nn.Conv2d(2 * ch, num_classes, 3, padding=1)

    def forward(self, x):
        f = self.encoder(x)
        fb, fs = self.blur_branch(f), self.seg_branch(f)
        sb, ss = self.spatial(fb, fs)
        return self.blur_head(torch.cat([fb, sb], 1)), self.seg_head(torch.cat([fs, ss], 1))


def synthetic_scenes(n, seed, size=32):
    g = torch.Generator().manual_seed(seed)
    seg = torch.zeros(n, size, size, dtype=torch.long)
    yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
    for i in range(n):
        cy, cx, r = torch.randint(8, 24, (3,), generator=g)
        seg[i][((yy - cy) ** 2 + (xx - cx) ** 2) < (r // 2 + 3) ** 2] = 1
        seg[i][(yy > 26) & (seg[i] == 0)] = 2
    colours = torch.tensor([[0.2, 0.5, 0.9], [0.9, 0.3, 0.2], [0.3, 0.8, 0.3]])
    img = colours[seg].permute(0, 3, 1, 2) + 0.1 * torch.randn(n, 3, size, size, generator=g)
    blur = (seg.float() * 0.4 + 0.1 * xx.float() / size).unsqueeze(1)   # per-region blur level
    img = img + 0.3 * blur * torch.randn(n, 3, size, size, generator=g)
    return img, blur, seg


def train_stage1(model, loader, optimizer, scheduler, epoch):
    model.train()
    for step, (img, blur, seg) in enumerate(loader):
        blur_est, seg_est = model(img)
        l_blur = F.l1_loss(blur_est, blur)
        l_seg = F.cross_entropy(seg_est, seg)
        loss = l_blur + 0.5 * l_seg
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        if step % 10 == 0:
            print(f"epoch {epoch} iter {step} l_blur {l_blur.item():.4f} l_seg {l_seg.item():.4f}")


@torch.no_grad()
def validate(model, img, blur, seg):
    model.eval()
    blur_est, seg_est = model(img)
    miou = []
    pred = seg_est.argmax(1)
    for c in range(3):
        inter = ((pred == c) & (seg == c)).sum().item()
        union = ((pred == c) | (seg == c)).sum().item()
        miou.append(inter / max(union, 1))
    return F.l1_loss(blur_est, blur).item(), sum(miou) / 3


def main():
    torch.manual_seed(0)
    img, blur, seg = synthetic_scenes(288, 0)
    val = synthetic_scenes(64, 1)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(img, blur, seg), batch_size=16,
                                         shuffle=True, generator=torch.Generator().manual_seed(0))
    model = CMOS()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3, betas=(0.9, 0.99))
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[45, 62], gamma=0.5)
    for epoch in range(4):
        train_stage1(model, loader, optimizer, scheduler, epoch)
        l1, miou = validate(model, *val)
        print(f"epoch {epoch} val blur L1 {l1:.4f} seg mIoU {miou:.3f}")


if __name__ == "__main__":
    main()
