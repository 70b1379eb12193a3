"""An event-camera classifier in the style of a learnt-quantization pipeline: an NCaltech101-like
dataset class numbers its classes in the order listdir(root) returns the class folders, a Loader
collates the variable-length event lists with a batch-index column, and the model bins events into
a voxel grid through a small learnt kernel before a CNN. The main loop runs a validation pass
(eval, no_grad) and then a training pass (zero_grad, backward, step) every epoch, with Adam and an
ExponentialLR stepped every few epochs. Training and validation are two separate roots whose
folders the directory listing returns in a different order, so the same class gets a different
index in each split: validation accuracy stays low while training accuracy climbs.

Thread: https://github.com/uzh-rpg/rpg_event_representation_learning/issues/2
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

H, W = 16, 16
CLASS_CENTRES = {"airplanes": (3, 4), "butterfly": (12, 6), "chair": (6, 12), "dolphin": (8, 8),
                 "watch": (13, 13)}


def write_split(order, per_class, seed):
    """Stands in for a split folder on disk: class folder -> event files, in the order the
    directory happens to list them."""
    rng = np.random.default_rng(seed)
    folders = {}
    for name in order:
        cy, cx = CLASS_CENTRES[name]
        files = []
        for _ in range(per_class):
            n = 160
            x = np.clip(rng.normal(cx, 1.5, n), 0, W - 1).round()
            y = np.clip(rng.normal(cy, 1.5, n), 0, H - 1).round()
            t = np.sort(rng.random(n))
            p = rng.choice([-1.0, 1.0], n)
            files.append(np.stack([x, y, t, p], 1).astype(np.float32))
        folders[name] = files
    return folders


DISK = {
    "N-Caltech101/training": write_split(["airplanes", "butterfly", "chair", "dolphin", "watch"], 40, 0),
    "N-Caltech101/validation": write_split(["chair", "watch", "airplanes", "dolphin", "butterfly"], 12, 1),
}


def listdir(root):
    return list(DISK[root].keys())


def random_shift_events(events, max_shift=2):
    shift = np.random.randint(-max_shift, max_shift + 1, size=(2,))
    events[:, 0] += shift[0]
    events[:, 1] += shift[1]
    keep = (events[:, 0] >= 0) & (events[:, 0] < W) & (events[:, 1] >= 0) & (events[:, 1] < H)
    return events[keep]


class NCaltech101:
    def __init__(self, root, augmentation=False):
        self.classes = listdir(root)
        self.files, self.labels = [], []
        self.augmentation = augmentation
        for i, c in enumerate(self.classes):
            new_files = DISK[root][c]
            self.files += new_files
            self.labels += [i] * len(new_files)

    def __len__(self):
        return len(self.files)

    def __getitem__(self, idx):
        events = self.files[idx].copy()
        if self.augmentation:
            events = random_shift_events(events)
        return events, self.labels[idx]


class Loader:
    def __init__(self, dataset, batch_size, shuffle):
        self.dataset, self.batch_size, self.shuffle = dataset, batch_size, shuffle

    def __len__(self):
        return (len(self.dataset) + self.batch_size - 1) // self.batch_size

    def __iter__(self):
        order = torch.randperm(len(self.dataset)).tolist() if self.shuffle else range(len(self.dataset))
        order = list(order)
        for b in range(len(self)):
            events, labels = [], []
            for i, idx in enumerate(order[b * self.batch_size:(b + 1) * self.batch_size]):
                ev, label = self.dataset[idx]
                events.append(np.concatenate([ev, np.full((len(ev), 1), i, np.float32)], 1))
                labels.append(label)
            yield torch.from_numpy(np.concatenate(events, 0)), torch.tensor(labels)


class QuantizationLayer(nn.Module):
    def __init__(self, bins=4):
        super().__init__()
        self.bins = bins
        self.value = nn.Sequential(nn.Linear(1, 16), nn.LeakyReLU(0.1), nn.Linear(16, 1))

    def forward(self, events):
        x, y, t, p, b = events.t()
        B = int(b.max().item()) + 1
        vox = events.new_zeros(B * 2 * self.bins * H * W)
        for i in range(self.bins):
            values = t * self.value((t - i / (self.bins - 1)).unsqueeze(1)).squeeze(1)
            idx = x + W * y + W * H * i + W * H * self.bins * (p > 0).float() + W * H * self.bins * 2 * b
            vox = vox.index_add(0, idx.long(), values)
        return vox.view(B, 2 * self.bins, H, W)


class Classifier(nn.Module):
    def __init__(self, num_classes=5):
        super().__init__()
        self.quantization_layer = QuantizationLayer()
        self.classifier = nn.Sequential(
            nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, num_classes))

    def forward(self, events):
        vox = self.quantization_layer(events)
        return self.classifier(vox), vox


def cross_entropy_loss_and_accuracy(prediction, target):
    loss = F.cross_entropy(prediction, target)
    accuracy = (prediction.argmax(1) == target).float().mean()
    return loss, accuracy


def main(num_epochs=4, batch_size=4):
    torch.manual_seed(1)
    np.random.seed(1)
    training_dataset = NCaltech101("N-Caltech101/training", augmentation=True)
    validation_dataset = NCaltech101("N-Caltech101/validation")
    training_loader = Loader(training_dataset, batch_size, shuffle=True)
    validation_loader = Loader(validation_dataset, batch_size, shuffle=False)

    model = Classifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    lr_scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, 0.5)
    iteration = 0
    for i in range(num_epochs):
        sum_accuracy, sum_loss = 0, 0
        model = model.eval()
        for events, labels in validation_loader:
            with torch.no_grad():
                pred_labels, representation = model(events)
                loss, accuracy = cross_entropy_loss_and_accuracy(pred_labels, labels)
            sum_accuracy += accuracy
            sum_loss += loss
        print(f"Validation Loss {sum_loss.item() / len(validation_loader):.4f}  "
              f"Accuracy {sum_accuracy.item() / len(validation_loader):.4f}")

        sum_accuracy, sum_loss = 0, 0
        model = model.train()
        for events, labels in training_loader:
            optimizer.zero_grad()
            pred_labels, representation = model(events)
            loss, accuracy = cross_entropy_loss_and_accuracy(pred_labels, labels)
            loss.backward()
            optimizer.step()
            sum_accuracy += accuracy
            sum_loss += loss.detach()
            iteration += 1
        if i % 3 == 2:
            lr_scheduler.step()
        print(f"Training Iteration {iteration:5d}  Loss {sum_loss.item() / len(training_loader):.4f}  "
              f"Accuracy {sum_accuracy.item() / len(training_loader):.4f}")


if __name__ == "__main__":
    main()
