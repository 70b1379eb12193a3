"""A bird-sound tagger in the style of a BirdCLEF training package: PyhaDFDataset.__getitem__
loads an annotated clip and its target, passes both through a Mixup module (which, with some
probability, sums the clip with one or two other random clips of the dataframe using random mix
factors and mixes their targets the same way, rounding the mixed target up to a grid), then
applies audio augmentations and, after to_image() (mel spectrogram, dB, standardization,
sigmoid, three channels), SpecAugment-style masks; those two augmentation steps are guarded
by `if self.train`. The training loop uses BCEWithLogitsLoss, AdamW and zero_grad / backward /
step, and valid() reports a class-wise mean average precision on the validation dataset, built
with train=False. The mixup call sits outside the `if self.train` guard, so validation clips are
mixed with random other clips and their targets are mixed too: the validation mAP is computed
on randomly altered clips and labels and changes from one evaluation to the next.

Thread: https://github.com/UCSD-E4E/acoustic-multiclass-training/pull/158
"""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

SR, N_SAMPLES, N_FFT, HOP, N_MELS, N_CLASSES = 8000, 4096, 256, 128, 32, 6
GEN = torch.Generator().manual_seed(5)


def rand(lo, hi):
    return lo + (hi - lo) * float(torch.rand(1, generator=GEN))


def mel_filterbank(n_freqs, n_mels, sr):
    mel = lambda f: 2595.0 * math.log10(1.0 + f / 700.0)  # noqa: E731
    pts = torch.linspace(mel(0.0), mel(sr / 2), n_mels + 2)
    hz = 700.0 * (10 ** (pts / 2595.0) - 1.0)
    freqs = torch.linspace(0, sr / 2, n_freqs)
    up = (freqs - hz[:-2, None]) / (hz[1:-1, None] - hz[:-2, None])
    down = (hz[2:, None] - freqs) / (hz[2:, None] - hz[1:-1, None])
    return torch.clamp(torch.minimum(up, down), min=0.0)


class Mixup(nn.Module):
    def __init__(self, df, prob=0.5, min_alpha=0.3, ceil_interval=0.25):
        super().__init__()
        self.df, self.prob, self.min_alpha, self.ceil_interval = df, prob, min_alpha, ceil_interval

    def get_rand_clip(self):
        return self.df[int(torch.randint(0, len(self.df), (1,), generator=GEN))]

    def mix_clips(self, clip, target, others):
        annotations = others + [(clip, target)]
        factors = torch.rand(len(annotations), generator=GEN) + self.min_alpha
        factors = factors / factors.sum()
        mixed_clip = sum(c * f for (c, _), f in zip(annotations, factors))
        mixed_target = sum(t * f for (_, t), f in zip(annotations, factors))
        mixed_target = torch.ceil(mixed_target / self.ceil_interval) * self.ceil_interval
        return mixed_clip, mixed_target.clamp(max=1.0)

    def forward(self, clip, target):
        if rand(0, 1) >= self.prob:
            return clip, target
        num_other_clips = 1 + int(rand(0, 1) < 0.3)
        return self.mix_clips(clip, target, [self.get_rand_clip() for _ in range(num_other_clips)])


class PyhaDFDataset(Dataset):
    def __init__(self, samples, train=True):
        self.samples, self.train = samples, train
        self.window = torch.hann_window(N_FFT)
        self.fb = mel_filterbank(N_FFT // 2 + 1, N_MELS, SR)
        self.mixup = Mixup(self.samples)

    def __len__(self):
        return len(self.samples)

    def audio_augmentations(self, audio):
        if rand(0, 1) < 0.3:
            audio = audio + 0.02 * torch.randn(audio.shape, generator=GEN)
        return audio

    def image_augmentations(self, image):
        if rand(0, 1) < 0.3:
            f0 = int(rand(0, N_MELS - 4))
            image[:, f0:f0 + 4] = 0.5
        return image

    def to_image(self, audio):
        spec = torch.stft(audio, N_FFT, HOP, window=self.window, return_complex=True).abs() ** 2
        mel = 10.0 * torch.log10(torch.clamp(self.fb @ spec, min=1e-10))
        mel = (mel - mel.mean()) / (mel.std() + 1e-6)
        mel = torch.sigmoid(mel)
        return torch.stack([mel, mel, mel])

    def __getitem__(self, index):
        audio, target = self.samples[index]
        audio, target = self.mixup(audio, target)
        if self.train:
            audio = self.audio_augmentations(audio)
        image = self.to_image(audio)
        if self.train:
            image = self.image_augmentations(image)
        return image, target


class TimmModel(nn.Module):
    def __init__(self, num_classes=N_CLASSES):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.head(self.backbone(x))


def average_precision(scores, targets):
    hits = targets[scores.argsort(descending=True)]
    if hits.sum() == 0:
        return None
    precision = hits.cumsum(0) / torch.arange(1, len(hits) + 1)
    return float((precision * hits).sum() / hits.sum())


def valid(model, data_loader, loss_fn):
    model.eval()
    preds, labels, running = [], [], 0.0
    with torch.no_grad():
        for mels, target in data_loader:
            out = model(mels)
            running += loss_fn(out, target).item()
            preds.append(torch.sigmoid(out))
            labels.append((target > 0).float())
    preds, labels = torch.cat(preds), torch.cat(labels)
    aps = [ap for ap in (average_precision(preds[:, c], labels[:, c]) for c in range(N_CLASSES)) if ap is not None]
    return running / len(data_loader), sum(aps) / len(aps)


def train(model, data_loader, optimizer, loss_fn, epoch, step):
    model.train()
    for i, (mels, labels) in enumerate(data_loader):
        optimizer.zero_grad()
        loss = loss_fn(model(mels), labels)
        loss.backward()
        optimizer.step()
        if i % 10 == 0:
            print(f"epoch {epoch} step {step}: train loss {loss.item():.4f}")
        step += 1
    return step


def make_annotations(n, seed):
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(N_SAMPLES) / SR
    samples = []
    for _ in range(n):
        species = int(torch.randint(0, N_CLASSES, (1,), generator=g))
        f0 = 400.0 + 450.0 * species + 40.0 * float(torch.randn(1, generator=g))
        call = torch.sin(2 * math.pi * f0 * t + 6.28 * float(torch.rand(1, generator=g)))
        gate = (torch.sin(2 * math.pi * (2.0 + 0.4 * species) * t) > 0).float()
        audio = 0.4 * call * gate + 0.08 * torch.randn(N_SAMPLES, generator=g)
        samples.append((audio, F.one_hot(torch.tensor(species), N_CLASSES).float()))
    return samples


def main():
    torch.manual_seed(0)
    train_dataset = PyhaDFDataset(make_annotations(480, 0), train=True)
    valid_dataset = PyhaDFDataset(make_annotations(160, 1), train=False)
    train_loader = DataLoader(train_dataset, batch_size=16, shuffle=True, generator=torch.Generator().manual_seed(0))
    valid_loader = DataLoader(valid_dataset, batch_size=32, shuffle=False)
    model = TimmModel()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)
    loss_fn = nn.BCEWithLogitsLoss()
    step = 0
    for epoch in range(3):
        step = train(model, train_loader, optimizer, loss_fn, epoch, step)
        valid_loss, valid_map = valid(model, valid_loader, loss_fn)
        print(f"epoch {epoch}: validation loss {valid_loss:.4f}  validation cmAP {valid_map:.4f}")
    print("re-evaluating the final model twice:",
          [round(valid(model, valid_loader, loss_fn)[1], 4) for _ in range(2)])


if __name__ == "__main__":
    main()
