"""A detecto-style wrapper around a torchvision-like detector: Model(classes) holds an internal
network that returns a dict of losses when called with targets in training mode, and
Model.fit(dataset, val_dataset, epochs, learning_rate, momentum, weight_decay, gamma, lr_step_size,
verbose) wraps plain datasets in DataLoaders, trains the parameters with requires_grad through SGD
with a StepLR stepped once per epoch, and after every epoch computes a validation loss under
torch.no_grad() that it prints and returns as a list. The validation loop iterates over the
training loader (`for images, targets in dataset`) instead of `val_dataset` and divides the sum by
the size of the validation set, so the returned "validation" losses are training losses on the
images just fitted and keep falling while the detector overfits its small training set.

Thread: https://github.com/alankbi/detecto/pull/38
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

IMG = 24


class BoxDataset(Dataset):
    """One labelled box per image, labels given as class names like a detecto Dataset."""

    def __init__(self, n, seed, names):
        g = torch.Generator().manual_seed(seed)
        protos = torch.randn(len(names), 3, 6, 6, generator=torch.Generator().manual_seed(5))
        self.items = []
        for _ in range(n):
            c = int(torch.randint(0, len(names), (1,), generator=g))
            x0, y0 = (int(v) for v in torch.randint(0, IMG - 6, (2,), generator=g))
            img = torch.randn(3, IMG, IMG, generator=g)
            img[:, y0:y0 + 6, x0:x0 + 6] += 2.0 * protos[c]
            box = torch.tensor([x0, y0, x0 + 6, y0 + 6], dtype=torch.float32) / IMG
            self.items.append((img, {"boxes": box, "labels": names[c]}))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def collate(batch):
    return torch.stack([b[0] for b in batch]), [dict(b[1]) for b in batch]


class TinyFasterRCNN(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                  nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveMaxPool2d(2), nn.Flatten(),
                                  nn.Linear(64 * 4, 128), nn.ReLU())
        self.cls_score = nn.Linear(128, num_classes)
        self.bbox_pred = nn.Linear(128, 4)

    def forward(self, images, targets=None):
        h = self.body(images)
        logits, boxes = self.cls_score(h), torch.sigmoid(self.bbox_pred(h))
        if self.training:
            labels = torch.stack([t["labels"] for t in targets])
            gt = torch.stack([t["boxes"] for t in targets])
            return {"loss_classifier": F.cross_entropy(logits, labels), "loss_box_reg": F.smooth_l1_loss(boxes, gt)}
        return [{"boxes": b, "labels": l, "scores": s} for b, (s, l) in zip(boxes, logits.softmax(-1).max(-1))]


class Model:
    def __init__(self, classes):
        self._classes = ["__background__"] + classes
        self._int_mapping = {label: i for i, label in enumerate(self._classes)}
        self._model = TinyFasterRCNN(len(self._classes))

    def _convert_to_int_labels(self, targets):
        for target in targets:
            if isinstance(target["labels"], str):
                target["labels"] = torch.tensor(self._int_mapping[target["labels"]])

    def fit(self, dataset, val_dataset=None, epochs=10, learning_rate=0.005, momentum=0.9,
            weight_decay=0.0005, gamma=0.1, lr_step_size=3, verbose=False):
        if not isinstance(dataset, DataLoader):
            dataset = DataLoader(dataset, shuffle=True, collate_fn=collate)
        if val_dataset is not None and not isinstance(val_dataset, DataLoader):
            val_dataset = DataLoader(val_dataset, collate_fn=collate)
        losses = []
        parameters = [p for p in self._model.parameters() if p.requires_grad]
        optimizer = torch.optim.SGD(parameters, lr=learning_rate, momentum=momentum, weight_decay=weight_decay)
        lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=lr_step_size, gamma=gamma)
        for epoch in range(epochs):
            if verbose:
                print(f"Epoch {epoch + 1} of {epochs}")
            self._model.train()
            for images, targets in dataset:
                self._convert_to_int_labels(targets)
                loss_dict = self._model(images, targets)
                total_loss = sum(loss for loss in loss_dict.values())
                optimizer.zero_grad()
                total_loss.backward()
                optimizer.step()
            if val_dataset is not None:
                avg_loss = 0
                with torch.no_grad():
                    for images, targets in dataset:
                        self._convert_to_int_labels(targets)
                        loss_dict = self._model(images, targets)
                        total_loss = sum(loss for loss in loss_dict.values())
                        avg_loss += total_loss.item()
                avg_loss /= len(val_dataset.dataset)
                losses.append(avg_loss)
                if verbose:
                    print(f"Loss: {avg_loss}")
            lr_scheduler.step()
        if len(losses) > 0:
            return losses


def main():
    torch.manual_seed(0)
    names = ["rose", "tulip", "daisy"]
    dataset = BoxDataset(48, seed=0, names=names)
    val_dataset = BoxDataset(48, seed=1, names=names)
    loader = DataLoader(dataset, batch_size=2, shuffle=True, collate_fn=collate,
                        generator=torch.Generator().manual_seed(0))
    model = Model(names)
    losses = model.fit(loader, val_dataset, epochs=6, learning_rate=0.01, lr_step_size=4, verbose=True)
    print("validation losses:", [round(v, 4) for v in losses])


if __name__ == "__main__":
    main()
