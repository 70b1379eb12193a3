"""A maskrcnn-benchmark-style detection pipeline: a COCODataset class wraps a COCO-format annotation
dict and maps the json category ids to contiguous training labels with
enumerate(coco.getCatIds()), do_train() runs loss_dict = model(images, targets), sums the losses and
calls zero_grad / backward / step and a per-iteration warmup scheduler, and inference() maps the
predicted labels back to json ids through the dataset's contiguous_category_id_to_json_id before a
COCO-style evaluation. train.json lists its categories in id order (1, 2, 3) while val.json lists
them as (2, 1, 3) with the same id-name pairs; getCatIds() keeps the file order, so the two
datasets build different label maps and the trained classes 1 and 2 are reported swapped on the
validation set: boxes are localised but classified wrongly, and AP is near zero for those classes.

Thread: https://github.com/facebookresearch/maskrcnn-benchmark/issues/970
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

IMG = 24
PATCH = 8


class TinyCOCO:
    """The part of pycocotools.COCO that the dataset uses."""

    def __init__(self, dataset):
        self.dataset = dataset
        self.imgs = {im["id"]: im for im in dataset["images"]}
        self.anns = {im["id"]: [a for a in dataset["annotations"] if a["image_id"] == im["id"]]
                     for im in dataset["images"]}

    def getCatIds(self):
        return [cat["id"] for cat in self.dataset["categories"]]


def make_annotation_file(n, seed, category_order):
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(3, 3, PATCH, PATCH, generator=torch.Generator().manual_seed(7))
    names = {1: "CLASS1", 2: "CLASS2", 3: "CLASS3"}
    images, annotations, pixels = [], [], {}
    for i in range(n):
        cat = int(torch.randint(1, 4, (1,), generator=g))
        x0, y0 = (int(v) for v in torch.randint(0, IMG - PATCH, (2,), generator=g))
        img = 0.4 * torch.randn(3, IMG, IMG, generator=g)
        img[:, y0:y0 + PATCH, x0:x0 + PATCH] += protos[cat - 1]
        pixels[i] = img
        images.append({"id": i, "width": IMG, "height": IMG})
        annotations.append({"id": i, "image_id": i, "category_id": cat, "bbox": [x0, y0, PATCH, PATCH]})
    categories = [{"supercategory": "SUPER", "id": c, "name": names[c]} for c in category_order]
    return {"images": images, "annotations": annotations, "categories": categories}, pixels


class COCODataset(Dataset):
    def __init__(self, ann, pixels):
        self.coco = TinyCOCO(ann)
        self.pixels = pixels
        self.ids = sorted(self.coco.imgs)
        self.json_category_id_to_contiguous_id = {v: i + 1 for i, v in enumerate(self.coco.getCatIds())}
        self.contiguous_category_id_to_json_id = {v: k for k, v in self.json_category_id_to_contiguous_id.items()}

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, idx):
        img_id = self.ids[idx]
        anno = self.coco.anns[img_id][0]
        x, y, w, h = anno["bbox"]
        box = torch.tensor([x, y, x + w, y + h], dtype=torch.float32) / IMG
        label = torch.tensor(self.json_category_id_to_contiguous_id[anno["category_id"]])
        return self.pixels[img_id], {"boxes": box, "labels": label}, idx


def collate(batch):
    images = torch.stack([b[0] for b in batch])
    targets = {"boxes": torch.stack([b[1]["boxes"] for b in batch]),
               "labels": torch.stack([b[1]["labels"] for b in batch])}
    return images, targets, [b[2] for b in batch]


class GeneralizedRCNN(nn.Module):
    def __init__(self, num_classes=4):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1),
                                      nn.ReLU(), nn.AdaptiveMaxPool2d(3), nn.Flatten())
        self.cls_score = nn.Linear(32 * 9, num_classes)
        self.bbox_pred = nn.Linear(32 * 9, 4)

    def forward(self, images, targets=None):
        feats = self.backbone(images)
        logits, boxes = self.cls_score(feats), torch.sigmoid(self.bbox_pred(feats))
        if self.training:
            return {"loss_classifier": F.cross_entropy(logits, targets["labels"]),
                    "loss_box_reg": F.smooth_l1_loss(boxes, targets["boxes"], beta=0.1)}
        return boxes, logits[:, 1:].softmax(-1).max(-1)


def do_train(model, data_loader, optimizer, scheduler, max_iter):
    model.train()
    iteration = 0
    while iteration < max_iter:
        for images, targets, _ in data_loader:
            loss_dict = model(images, targets)
            losses = sum(loss for loss in loss_dict.values())
            optimizer.zero_grad()
            losses.backward()
            optimizer.step()
            scheduler.step()
            iteration += 1
            if iteration % 20 == 0:
                print(f"iter: {iteration} loss: {losses.item():.4f} "
                      + " ".join(f"{k}: {v.item():.4f}" for k, v in loss_dict.items()))
            if iteration == max_iter:
                return


def box_iou(a, b):
    lt, rb = torch.max(a[:, :2], b[:, :2]), torch.min(a[:, 2:], b[:, 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    return inter / ((a[:, 2:] - a[:, :2]).prod(-1) + (b[:, 2:] - b[:, :2]).prod(-1) - inter)


@torch.no_grad()
def inference(model, dataset):
    model.eval()
    loader = DataLoader(dataset, batch_size=64, collate_fn=collate)
    hits, totals = {1: 0, 2: 0, 3: 0}, {1: 0, 2: 0, 3: 0}
    for images, _, idxs in loader:
        boxes, (scores, labels) = model(images)
        for box, label, idx in zip(boxes, labels, idxs):
            json_id = dataset.contiguous_category_id_to_json_id[int(label) + 1]
            gt = dataset.coco.anns[dataset.ids[idx]][0]
            x, y, w, h = gt["bbox"]
            gt_box = torch.tensor([[x, y, x + w, y + h]], dtype=torch.float32) / IMG
            totals[gt["category_id"]] += 1
            hits[gt["category_id"]] += int(json_id == gt["category_id"] and box_iou(box[None], gt_box).item() > 0.5)
    for cat in totals:
        print(f"category {cat}: AP50 proxy {hits[cat] / max(totals[cat], 1):.3f}")
    print(f"bbox AP50 proxy: {sum(hits.values()) / sum(totals.values()):.3f}")


def main():
    torch.manual_seed(0)
    train_ann, train_pix = make_annotation_file(768, seed=0, category_order=[1, 2, 3])
    val_ann, val_pix = make_annotation_file(192, seed=1, category_order=[2, 1, 3])
    train_set, val_set = COCODataset(train_ann, train_pix), COCODataset(val_ann, val_pix)
    loader = DataLoader(train_set, batch_size=16, shuffle=True, collate_fn=collate,
                        generator=torch.Generator().manual_seed(0))
    model = GeneralizedRCNN()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda it: min(1.0, (it + 1) / 20))
    do_train(model, loader, optimizer, scheduler, max_iter=150)
    inference(model, val_set)


if __name__ == "__main__":
    main()
