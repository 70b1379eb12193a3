"""A Lightning-style CropModel that classifies species crops: load_from_disk(train_dir, val_dir)
builds one ImageFolder-like dataset per directory, label_dict is taken from the training folder,
train/val dataloaders feed training_step (cross entropy) and validation_step (overall and
per-class accuracy), and a small Trainer.fit drives the loop with Adam.

Each folder dataset numbers its own sorted subfolders. The validation directory has no folder for
one rare species, so every species sorted after it gets an index one lower in validation than in
training: the model is scored against shifted labels, and the per-class validation accuracy of
those species is 0 while the common species keep the overall accuracy looking reasonable.

Thread: https://github.com/weecology/DeepForest/pull/1147
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

SPECIES = ["Cormorant", "Gull", "Pelican", "Tern", "Turtle"]


def crops_on_disk(counts, seed):
    """Stand-in for a directory of crops: {subfolder name: list of 3x16x16 images}."""
    g = torch.Generator().manual_seed(seed)
    proto = torch.Generator().manual_seed(1234)
    colors = torch.rand(len(SPECIES), 3, 1, 1, generator=proto)
    shapes = torch.randn(len(SPECIES), 1, 16, 16, generator=proto)
    root = {}
    for k, name in enumerate(SPECIES):
        if counts[k] == 0:
            continue  # no crops of this species in this split, so no folder
        imgs = colors[k] + 0.5 * shapes[k] + 0.6 * torch.randn(counts[k], 3, 16, 16, generator=g)
        root[name] = list(imgs.clamp(0, 1))
    return root


class ImageFolder(Dataset):
    def __init__(self, root, transform=None):
        self.classes = sorted(root.keys())
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        self.samples = [(img, self.class_to_idx[c]) for c in self.classes for img in root[c]]
        self.transform = transform

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        img, target = self.samples[i]
        if self.transform is not None:
            img = self.transform(img)
        return img, target


def simple_cnn(num_classes):
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(32, num_classes),
    )


class CropModel(nn.Module):
    def __init__(self, num_classes=None, batch_size=32, lr=1e-3):
        super().__init__()
        self.num_classes = num_classes
        self.batch_size = batch_size
        self.lr = lr
        self.label_dict = None
        self.numeric_to_label_dict = None
        if num_classes is not None:
            self.create_model(num_classes)

    def create_model(self, num_classes):
        self.model = simple_cnn(num_classes)

    def get_transform(self, augment):
        mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
        std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)

        def transform(img):
            img = (img - mean) / std
            if augment and torch.rand(()) < 0.5:
                img = torch.flip(img, dims=[2])
            return img

        return transform

    def load_from_disk(self, train_dir, val_dir, recreate_model=False):
        self.train_ds = ImageFolder(root=train_dir, transform=self.get_transform(augment=True))
        self.val_ds = ImageFolder(root=val_dir, transform=self.get_transform(augment=False))
        self.label_dict = self.train_ds.class_to_idx
        self.numeric_to_label_dict = {v: k for k, v in self.label_dict.items()}
        if recreate_model:
            self.num_classes = len(self.label_dict)
            self.create_model(num_classes=self.num_classes)

    def forward(self, x):
        return self.model(x)

    def train_dataloader(self):
        return DataLoader(self.train_ds, batch_size=self.batch_size, shuffle=True,
                          generator=torch.Generator().manual_seed(0))

    def val_dataloader(self):
        return DataLoader(self.val_ds, batch_size=self.batch_size)

    def training_step(self, batch, batch_idx):
        x, y = batch
        outputs = self.forward(x)
        return F.cross_entropy(outputs, y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        outputs = self(x)
        loss = F.cross_entropy(outputs, y)
        preds = outputs.argmax(1)
        for c in range(self.num_classes):
            mask = y == c
            self._val_hits[c] += (preds[mask] == c).sum().item()
            self._val_counts[c] += mask.sum().item()
        return loss

    def on_validation_epoch_start(self):
        self._val_hits = [0] * self.num_classes
        self._val_counts = [0] * self.num_classes

    def on_validation_epoch_end(self):
        logs = {"Accuracy": sum(self._val_hits) / max(1, sum(self._val_counts))}
        for c in range(self.num_classes):
            if self._val_counts[c]:
                logs[f"Class Accuracy_{self.numeric_to_label_dict[c]}"] = self._val_hits[c] / self._val_counts[c]
        return logs

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)


class Trainer:
    def __init__(self, max_epochs):
        self.max_epochs = max_epochs

    def fit(self, module):
        optimizer = module.configure_optimizers()
        for epoch in range(self.max_epochs):
            module.train()
            for batch_idx, batch in enumerate(module.train_dataloader()):
                loss = module.training_step(batch, batch_idx)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            module.eval()
            module.on_validation_epoch_start()
            val_losses = []
            with torch.no_grad():
                for batch_idx, batch in enumerate(module.val_dataloader()):
                    val_losses.append(module.validation_step(batch, batch_idx).item())
            logs = module.on_validation_epoch_end()
            per_class = ", ".join(f"{k.split('_')[1]} {v:.2f}" for k, v in logs.items() if k != "Accuracy")
            print(f"epoch {epoch} val_loss {sum(val_losses) / len(val_losses):.3f} "
                  f"Accuracy {logs['Accuracy']:.3f} | {per_class}")


def main():
    torch.manual_seed(0)
    train_dir = crops_on_disk([150, 400, 60, 120, 90], seed=0)
    val_dir = crops_on_disk([40, 100, 0, 30, 20], seed=1)  # no pelican crops in this split
    model = CropModel(batch_size=32, lr=2e-3)
    model.load_from_disk(train_dir, val_dir, recreate_model=True)
    Trainer(max_epochs=4).fit(model)


if __name__ == "__main__":
    main()
