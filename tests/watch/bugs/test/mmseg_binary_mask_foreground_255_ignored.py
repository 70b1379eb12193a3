"""An mmsegmentation-style binary segmentation setup driven by a config dict: a CustomDataset
class (classes background/target, ignore_index=255) holds image/annotation pairs, an
EncoderDecoder segmentor with a decode head computes loss_decode with CrossEntropyLoss(ignore_index
taken from the config), and an iteration-based runner calls train_step(data_batch, optimizer),
which parses the loss dict, zeroes the gradients, backpropagates and steps SGD under a poly
learning-rate policy, with an mIoU/mAcc evaluation hook at the end. The annotation masks store
background as 0 and the target as 255, and 255 is the value the dataset and the loss ignore: every
target pixel is dropped from the loss and from the metric, so the network only ever learns
background, and the target's IoU and accuracy come out as 0 or nan (no counted pixels).

Thread: https://github.com/open-mmlab/mmsegmentation/issues/1609
"""
import torch
import torch.nn.functional as F
from torch import nn

cfg = dict(
    num_classes=2,
    ignore_index=255,
    crop_size=(32, 32),
    optimizer=dict(lr=0.01, momentum=0.9, weight_decay=0.0005),
    lr_config=dict(power=0.9, min_lr=1e-4),
    runner=dict(max_iters=120),
    data=dict(samples_per_gpu=8),
)


class CustomDataset:
    CLASSES = ("background", "target")

    def __init__(self, num_images, seed, ignore_index=255):
        self.ignore_index = ignore_index
        g = torch.Generator().manual_seed(seed)
        h, w = cfg["crop_size"]
        yy, xx = torch.meshgrid(torch.arange(h).float(), torch.arange(w).float(), indexing="ij")
        self.img_infos = []
        for _ in range(num_images):
            cy, cx = (torch.rand(2, generator=g) * torch.tensor([h - 8.0, w - 8.0]) + 4).tolist()
            r = 3 + 4 * torch.rand(1, generator=g).item()
            blob = ((yy - cy) ** 2 + (xx - cx) ** 2) < r ** 2
            img = 0.6 * torch.randn(3, h, w, generator=g)
            img[:, blob] += torch.tensor([1.0, -0.5, 0.8])[:, None]
            seg_map = torch.where(blob, 255, 0).to(torch.uint8)  # annotation png: target drawn as 255
            self.img_infos.append(dict(img=img, gt_semantic_seg=seg_map))

    def __len__(self):
        return len(self.img_infos)

    def __getitem__(self, idx):
        info = self.img_infos[idx]
        return dict(img=info["img"], gt_semantic_seg=info["gt_semantic_seg"].long())


class FCNHead(nn.Module):
    def __init__(self, in_channels, num_classes, ignore_index):
        super().__init__()
        self.convs = nn.Sequential(nn.Conv2d(in_channels, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU())
        self.conv_seg = nn.Conv2d(32, num_classes, 1)
        self.loss_decode = nn.CrossEntropyLoss(ignore_index=ignore_index)

    def forward(self, x):
        return self.conv_seg(self.convs(x))

    def losses(self, seg_logit, seg_label):
        return dict(loss_ce=self.loss_decode(seg_logit, seg_label))


class EncoderDecoder(nn.Module):
    def __init__(self, num_classes, ignore_index):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                                      nn.Conv2d(32, 32, 3, padding=2, dilation=2), nn.BatchNorm2d(32), nn.ReLU())
        self.decode_head = FCNHead(32, num_classes, ignore_index)

    def encode_decode(self, img):
        return self.decode_head(self.backbone(img))

    def forward_train(self, img, gt_semantic_seg):
        return self.decode_head.losses(self.encode_decode(img), gt_semantic_seg)

    def train_step(self, data_batch, optimizer):
        losses = self.forward_train(**data_batch)
        loss = sum(losses.values())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return dict(loss=loss, log_vars={k: v.item() for k, v in losses.items()})


def collate(items):
    return {k: torch.stack([it[k] for it in items]) for k in items[0]}


def evaluate(model, dataset, num_classes, ignore_index):
    model.eval()
    inter, union, label_area = torch.zeros(num_classes), torch.zeros(num_classes), torch.zeros(num_classes)
    with torch.no_grad():
        for i in range(0, len(dataset), 16):
            batch = collate([dataset[j] for j in range(i, min(i + 16, len(dataset)))])
            pred = model.encode_decode(batch["img"]).argmax(1)
            label = batch["gt_semantic_seg"]
            mask = label != ignore_index
            pred, label = pred[mask], label[mask]
            hit = pred[pred == label]
            a_inter = torch.bincount(hit, minlength=num_classes).float()
            a_pred = torch.bincount(pred, minlength=num_classes).float()
            a_label = torch.bincount(label, minlength=num_classes).float()
            inter += a_inter
            union += a_pred + a_label - a_inter
            label_area += a_label
    model.train()
    for c, name in enumerate(CustomDataset.CLASSES):
        print(f"| {name:10s} | IoU {100 * (inter[c] / union[c]).item():6.2f} | Acc {100 * (inter[c] / label_area[c]).item():6.2f} |")


def main():
    torch.manual_seed(0)
    train_set = CustomDataset(480, seed=0, ignore_index=cfg["ignore_index"])
    val_set = CustomDataset(64, seed=1, ignore_index=cfg["ignore_index"])
    model = EncoderDecoder(cfg["num_classes"], cfg["ignore_index"])
    optimizer = torch.optim.SGD(model.parameters(), **cfg["optimizer"])
    base_lr, max_iters = cfg["optimizer"]["lr"], cfg["runner"]["max_iters"]
    bs = cfg["data"]["samples_per_gpu"]
    g = torch.Generator().manual_seed(0)
    model.train()
    it = 0
    while it < max_iters:
        order = torch.randperm(len(train_set), generator=g).tolist()
        for start in range(0, len(order) - bs + 1, bs):
            lr = (base_lr - cfg["lr_config"]["min_lr"]) * (1 - it / max_iters) ** cfg["lr_config"]["power"]
            for group in optimizer.param_groups:
                group["lr"] = lr + cfg["lr_config"]["min_lr"]
            outputs = model.train_step(collate([train_set[i] for i in order[start:start + bs]]), optimizer)
            it += 1
            if it % 20 == 0:
                print(f"Iter [{it}/{max_iters}] lr: {optimizer.param_groups[0]['lr']:.3e}, "
                      f"loss_ce: {outputs['log_vars']['loss_ce']:.4f}")
            if it == max_iters:
                break
    evaluate(model, val_set, cfg["num_classes"], cfg["ignore_index"])


if __name__ == "__main__":
    main()
