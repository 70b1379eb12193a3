"""Lane detection in the shape of a RESA-style codebase: `RESANet` runs a conv backbone,
a spatial feature aggregator and a segmentation decoder, plus an `ExistHead` that
predicts, per lane slot, whether that lane is present (dropout, 1x1 conv, softmax over
classes, avg-pool, fc9, ReLU, fc10, sigmoid). A trainer module `RESA(net, batch)`
computes a weighted NLL segmentation loss on `log_softmax(seg)` and
`0.1 * BCEWithLogitsLoss(exist, exist_label)`, and a `Runner` does zero_grad /
backward / step / scheduler.step per batch. The bug: the existence head already ends
in `torch.sigmoid`, and `BCEWithLogitsLoss` applies a second sigmoid, so the loss sees
sigmoid(p) with p in [0, 1], i.e. values only in [0.5, 0.73]. The existence loss cannot
go below ~0.31 for present lanes and log(2) for absent ones, its gradient is squashed,
and the logged exist_loss plateaus at a level that looks like a hard problem. Nothing
errors.

Thread: https://github.com/ZJULearning/resa/issues/29
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

NUM_CLASSES = 5  # background + 4 lane slots
H, W = 32, 64


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        )

    def forward(self, x):
        return self.net(x)  # stride 4


class RESAAggregator(nn.Module):
    """Recurrent feature shifts: each pass adds a conv of the feature map rolled by a stride."""

    def __init__(self, ch=32, iters=2):
        super().__init__()
        self.iters = iters
        self.convs = nn.ModuleList(nn.Conv2d(ch, ch, (1, 5), padding=(0, 2), bias=False) for _ in range(4 * iters))

    def forward(self, x):
        k = 0
        for i in range(self.iters):
            for dim, sign in ((2, 1), (2, -1), (3, 1), (3, -1)):
                shift = sign * (x.shape[dim] // 2 ** (self.iters - i))
                x = x + F.relu(self.convs[k](torch.roll(x, shift, dims=dim)))
                k += 1
        return x


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(32, NUM_CLASSES, 1)

    def forward(self, x):
        return F.interpolate(self.conv(x), size=(H, W), mode="bilinear", align_corners=False)


class ExistHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.dropout = nn.Dropout2d(0.1)
        self.conv8 = nn.Conv2d(32, NUM_CLASSES, 1)
        self.fc9 = nn.Linear(NUM_CLASSES * (H // 8) * (W // 8), 64)
        self.fc10 = nn.Linear(64, NUM_CLASSES - 1)

    def forward(self, x):
        x = self.dropout(x)
        x = self.conv8(x)
        x = F.softmax(x, dim=1)
        x = F.avg_pool2d(x, 2, stride=2, padding=0)
        x = x.view(-1, x.numel() // x.shape[0])
        x = F.relu(self.fc9(x))
        x = self.fc10(x)
        x = torch.sigmoid(x)  # probabilities come out of the head
        return x


class RESANet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = Backbone()
        self.resa = RESAAggregator()
        self.decoder = Decoder()
        self.heads = ExistHead()

    def forward(self, img):
        fea = self.resa(self.backbone(img))
        return {"seg": self.decoder(fea), "exist": self.heads(fea)}


class RESA(nn.Module):
    """Loss module, called as trainer(net, batch)."""

    def __init__(self, bg_weight=0.4, seg_loss_weight=1.0):
        super().__init__()
        self.seg_loss_weight = seg_loss_weight
        weights = torch.ones(NUM_CLASSES)
        weights[0] = bg_weight
        self.criterion = nn.NLLLoss(ignore_index=255, weight=weights)
        self.criterion_exist = nn.BCEWithLogitsLoss()  # expects logits

    def forward(self, net, batch):
        output = net(batch["img"])
        seg_loss = self.criterion(F.log_softmax(output["seg"], dim=1), batch["label"].long())
        loss = seg_loss * self.seg_loss_weight
        exist_loss = 0.1 * self.criterion_exist(output["exist"], batch["exist"].float())
        loss = loss + exist_loss
        return {"loss": loss, "loss_stats": {"seg_loss": seg_loss, "exist_loss": exist_loss}, "output": output}


def make_batch(gen, n):
    img = 0.3 * torch.randn(n, 3, H, W, generator=gen)
    label = torch.zeros(n, H, W, dtype=torch.long)
    exist = (torch.rand(n, NUM_CLASSES - 1, generator=gen) < 0.5).long()
    rows = torch.arange(H).float()
    for b in range(n):
        for lane in range(NUM_CLASSES - 1):
            if not exist[b, lane]:
                continue
            x0 = 8 + 16 * lane + float(torch.randint(-3, 4, (1,), generator=gen))
            slope = float(torch.rand(1, generator=gen) - 0.5) * 0.3
            cols = (x0 + slope * (rows - H / 2)).round().long().clamp(0, W - 1)
            for dx in (-1, 0, 1):
                c = (cols + dx).clamp(0, W - 1)
                img[b, :, rows.long(), c] += 1.5
                label[b, rows.long(), c] = lane + 1
    return {"img": img, "label": label, "exist": exist}


class Runner:
    def __init__(self, net, trainer, max_iter=200):
        self.net = net
        self.trainer = trainer
        self.max_iter = max_iter
        self.optimizer = torch.optim.Adam(net.parameters(), lr=2e-3, weight_decay=1e-4)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda it: (1 - it / max_iter) ** 0.9)

    def train(self, gen):
        self.net.train()
        for it in range(self.max_iter):
            batch = make_batch(gen, 8)
            ret = self.trainer(self.net, batch)
            self.optimizer.zero_grad()
            ret["loss"].backward()
            self.optimizer.step()
            self.scheduler.step()
            if it % 25 == 0 or it == self.max_iter - 1:
                s = ret["loss_stats"]
                with torch.no_grad():
                    acc = ((ret["output"]["exist"] > 0.5).long() == batch["exist"]).float().mean().item()
                print(f"iter {it:3d} loss {ret['loss'].item():.4f} seg_loss {s['seg_loss'].item():.4f} "
                      f"exist_loss {s['exist_loss'].item():.4f} exist_acc {acc:.3f}")


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    net = RESANet()
    Runner(net, RESA()).train(gen)


if __name__ == "__main__":
    main()
