"""A UCF101-style action recognition repo: a VideoDataset whose preprocess() step splits every class
folder into train/val/test with a random train_test_split over the clip files (test 20%, then val
20% of the rest), a small R3D network (Conv3d, BatchNorm3d, global pooling), and a train_model()
loop with train and val phases per epoch, SGD with momentum, StepLR and a test pass at the end.
UCF101 cuts each long source video into several clips (v_Class_gXX_cYY) that share actor,
background and viewpoint; splitting clip by clip puts clips of the same group on both sides, so val
and test accuracy measure recall of groups seen in training and come out far higher than on the
official group-wise split.

Thread: https://github.com/jfzhang95/pytorch-video-recognition/issues/16
"""
import numpy as np
import torch
from torch import nn, optim
from torch.utils.data import DataLoader, Dataset

CLASSES = ["ApplyEyeMakeup", "Archery", "BabyCrawling", "Basketball", "Biking", "Bowling", "Diving", "Fencing"]
GROUPS_PER_CLASS, CLIPS_PER_GROUP = 6, 5


def train_test_split(items, test_size, random_state):
    order = np.random.RandomState(random_state).permutation(len(items))
    n_test = int(np.ceil(test_size * len(items)))
    return [items[i] for i in order[n_test:]], [items[i] for i in order[:n_test]]


def list_raw_videos():
    return {c: [f"v_{c}_g{g:02d}_c{k:02d}" for g in range(1, GROUPS_PER_CLASS + 1)
                for k in range(1, CLIPS_PER_GROUP + 1)] for c in CLASSES}


def decode_clip(fname, clip_len=8, size=16):
    """Synthetic frames: a backdrop shared by every clip of a group, a weak class-specific motion."""
    _, cls, group, clip = fname.split("_")
    label = CLASSES.index(cls)
    g_group = torch.Generator().manual_seed(1000 * label + int(group[1:]))
    g_clip = torch.Generator().manual_seed(hash_name(fname))
    color = torch.randn(3, 1, 1, 1, generator=g_group)
    coarse = torch.randn(3, 1, 4, 4, generator=g_group).repeat_interleave(size // 4, 2).repeat_interleave(size // 4, 3)
    backdrop = color + 0.5 * coarse
    t = torch.arange(clip_len).float()[:, None, None]
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
    angle = 2 * np.pi * label / len(CLASSES)
    phase = 0.8 * (xx * np.cos(angle) + yy * np.sin(angle)) - 0.9 * t
    motion = 0.2 * torch.sin(phase)[None]
    return backdrop + motion + 0.6 * torch.randn(3, clip_len, size, size, generator=g_clip)


def hash_name(name):
    return sum((i + 1) * ord(ch) for i, ch in enumerate(name))


class VideoDataset(Dataset):
    _splits = None

    def __init__(self, dataset="ucf101", split="train", clip_len=8):
        self.split, self.clip_len = split, clip_len
        if VideoDataset._splits is None:
            VideoDataset._splits = self.preprocess()
        folder = VideoDataset._splits[split]
        self.fnames, labels = [], []
        for label in sorted(folder):
            for fname in folder[label]:
                self.fnames.append(fname)
                labels.append(label)
        self.label2index = {label: index for index, label in enumerate(sorted(set(labels)))}
        self.label_array = np.array([self.label2index[label] for label in labels], dtype=int)
        print(f"Number of {split} videos: {len(self.fnames)}")

    def preprocess(self):
        out = {"train": {}, "val": {}, "test": {}}
        for file, video_files in list_raw_videos().items():
            train_and_valid, test = train_test_split(video_files, test_size=0.2, random_state=42)
            train, val = train_test_split(train_and_valid, test_size=0.2, random_state=42)
            out["train"][file], out["val"][file], out["test"][file] = train, val, test
        return out

    def __len__(self):
        return len(self.fnames)

    def __getitem__(self, index):
        buffer = decode_clip(self.fnames[index], self.clip_len)
        return buffer, torch.tensor(self.label_array[index])


class R3DClassifier(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        def block(cin, cout, stride):
            return nn.Sequential(nn.Conv3d(cin, cout, 3, stride=stride, padding=1, bias=False),
                                 nn.BatchNorm3d(cout), nn.ReLU())
        self.res3d = nn.Sequential(block(3, 16, (1, 2, 2)), block(16, 32, 2), block(32, 32, 1), block(32, 64, 2))
        self.pool = nn.AdaptiveAvgPool3d(1)
        self.linear = nn.Linear(64, num_classes)

    def forward(self, x):
        return self.linear(self.pool(self.res3d(x)).flatten(1))


def train_model(num_classes=len(CLASSES), lr=1e-2, num_epochs=6):
    model = R3DClassifier(num_classes)
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)
    scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=10, gamma=0.1)
    train_dataloader = DataLoader(VideoDataset(split="train"), batch_size=8, shuffle=True,
                                  generator=torch.Generator().manual_seed(0))
    val_dataloader = DataLoader(VideoDataset(split="val"), batch_size=8)
    test_dataloader = DataLoader(VideoDataset(split="test"), batch_size=8)
    trainval_loaders = {"train": train_dataloader, "val": val_dataloader}
    for epoch in range(num_epochs):
        for phase in ["train", "val"]:
            running_loss, running_corrects = 0.0, 0
            model.train() if phase == "train" else model.eval()
            for inputs, labels in trainval_loaders[phase]:
                optimizer.zero_grad()
                with torch.set_grad_enabled(phase == "train"):
                    outputs = model(inputs)
                    loss = criterion(outputs, labels)
                if phase == "train":
                    loss.backward()
                    optimizer.step()
                running_loss += loss.item() * inputs.size(0)
                running_corrects += (outputs.argmax(1) == labels).sum().item()
            if phase == "train":
                scheduler.step()
            size = len(trainval_loaders[phase].dataset)
            print(f"[{phase}] Epoch: {epoch + 1}/{num_epochs} Loss: {running_loss / size:.4f} "
                  f"Acc: {running_corrects / size:.3f}")
    model.eval()
    correct = 0
    with torch.no_grad():
        for inputs, labels in test_dataloader:
            correct += (model(inputs).argmax(1) == labels).sum().item()
    print(f"[test] Acc: {correct / len(test_dataloader.dataset):.3f}")


if __name__ == "__main__":
    torch.manual_seed(0)
    train_model()
