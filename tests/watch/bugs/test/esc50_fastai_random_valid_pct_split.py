"""An ESC-50 spectrogram classifier in the style of a fast.ai notebook: every clip is rendered as
a spectrogram image and stored in a folder per class; an ImageDataBunch-like from_folder(path,
valid_pct=0.2, seed=...) builds the training and validation sets, and a Learner-like class with
a small CNN, Adam and a one-cycle learning-rate schedule runs fit_one_cycle and reports the
validation accuracy after each epoch. The dataset ships a predefined fold for every clip, and
several clips are cut from the same source recording and always share a fold, but from_folder
ignores the folds and picks a random 20% of all clips as validation, so most validation clips
have a sibling from the same recording in training and the reported accuracy measures
recognition of recordings the model has already heard, not of new sounds.

Thread: https://github.com/karolpiczak/ESC-50/pull/9
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

N_CLASSES, N_SOURCES_PER_CLASS, CLIPS_PER_SOURCE, N_MELS, N_FRAMES = 10, 16, 3, 16, 32


def build_folder(seed=0):
    """Spectrogram 'images' grouped by class folder; each clip records its source recording and fold."""
    g = torch.Generator().manual_seed(seed)
    class_templates = torch.randn(N_CLASSES, N_MELS, 1, generator=g)
    items = []
    for c in range(N_CLASSES):
        for s in range(N_SOURCES_PER_CLASS):
            source_print = torch.randn(N_MELS, N_FRAMES, generator=g)  # microphone, room, background of one recording
            fold = 1 + s % 5
            for k in range(CLIPS_PER_SOURCE):
                spec = (0.15 * class_templates[c] + 1.0 * source_print
                        + 0.5 * torch.randn(N_MELS, N_FRAMES, generator=g))
                items.append({"image": spec.unsqueeze(0), "label": c, "source": f"{fold}-{c}{s:03d}-{'ABC'[k]}",
                              "fold": fold})
    return items


class ImageList(Dataset):
    def __init__(self, items):
        self.items = items

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]["image"], self.items[i]["label"]


class ImageDataBunch:
    def __init__(self, train_ds, valid_ds, bs):
        self.train_dl = DataLoader(train_ds, batch_size=bs, shuffle=True, generator=torch.Generator().manual_seed(0))
        self.valid_dl = DataLoader(valid_ds, batch_size=2 * bs)

    @classmethod
    def from_folder(cls, items, valid_pct=0.2, seed=None, bs=16):
        g = torch.Generator().manual_seed(seed if seed is not None else 0)
        idx = torch.randperm(len(items), generator=g).tolist()
        n_valid = int(valid_pct * len(items))
        valid = [items[i] for i in idx[:n_valid]]
        train = [items[i] for i in idx[n_valid:]]
        return cls(ImageList(train), ImageList(valid), bs)

    def normalize(self):
        stats = torch.stack([x for x, _ in self.train_dl.dataset])
        mean, std = stats.mean(), stats.std()
        for ds in (self.train_dl.dataset, self.valid_dl.dataset):
            for it in ds.items:
                it["image"] = (it["image"] - mean) / std
        return self


def simple_cnn(n_classes):
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * (N_MELS // 4) * (N_FRAMES // 4), 64), nn.ReLU(),
                         nn.Linear(64, n_classes))


class Learner:
    def __init__(self, data, model, metrics=("accuracy",)):
        self.data, self.model, self.metrics = data, model, metrics
        self.loss_func = nn.CrossEntropyLoss()

    def validate(self):
        self.model.eval()
        correct, total, loss = 0, 0, 0.0
        with torch.no_grad():
            for xb, yb in self.data.valid_dl:
                out = self.model(xb)
                loss += self.loss_func(out, yb).item() * len(yb)
                correct += (out.argmax(1) == yb).sum().item()
                total += len(yb)
        return loss / total, correct / total

    def fit_one_cycle(self, cyc_len, max_lr=3e-3):
        opt = torch.optim.Adam(self.model.parameters(), lr=max_lr)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=max_lr, total_steps=cyc_len * len(self.data.train_dl))
        for epoch in range(cyc_len):
            self.model.train()
            train_loss = 0.0
            for xb, yb in self.data.train_dl:
                loss = self.loss_func(self.model(xb), yb)
                loss.backward()
                opt.step()
                opt.zero_grad()
                sched.step()
                train_loss += loss.item()
            valid_loss, acc = self.validate()
            print(f"epoch {epoch}  train_loss {train_loss / len(self.data.train_dl):.4f}  "
                  f"valid_loss {valid_loss:.4f}  accuracy {acc:.4f}")


def main():
    torch.manual_seed(0)
    items = build_folder()
    data = ImageDataBunch.from_folder(items, valid_pct=0.2, seed=42, bs=16).normalize()
    learn = Learner(data, simple_cnn(N_CLASSES))
    learn.fit_one_cycle(5)


if __name__ == "__main__":
    main()
