"""A bird-call classifier in the style of a BirdCLEF training repo: PyhaDF_Dataset.__getitem__
cuts a chunk out of a recording at an annotated offset, crops or pads it to a fixed length,
randomly rolls it and sometimes adds noise, computes a mel spectrogram, stacks it into three
channels and normalizes the image by dividing by its absolute maximum, then applies frequency
and time masking; targets are one-hot vectors. train(model, data_loader, optimizer, scheduler,
device, step, best_valid_cmap, epoch) runs zero_grad / forward / loss_fn / backward / step with
Adam and a CrossEntropyLoss on the one-hot targets, and valid() computes a mean average
precision. Some annotated chunks are digital silence, so their mel spectrogram is all zeros and
`image / image.abs().max()` is 0/0: the input is NaN, the loss becomes NaN and the NaN gradients
poison the weights, while training keeps running to the end.

Thread: https://github.com/UCSD-E4E/acoustic-multiclass-training/pull/9
"""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

SR, N_SAMPLES, N_FFT, HOP, N_MELS, N_CLASSES = 8000, 4096, 256, 128, 32, 6


def mel_filterbank(n_freqs, n_mels, sr):
    def hz_to_mel(f):
        return 2595.0 * math.log10(1.0 + f / 700.0)
    mels = torch.linspace(hz_to_mel(0.0), hz_to_mel(sr / 2), n_mels + 2)
    hz = 700.0 * (10 ** (mels / 2595.0) - 1.0)
    freqs = torch.linspace(0, sr / 2, n_freqs)
    lower, center, upper = hz[:-2, None], hz[1:-1, None], hz[2:, None]
    up = (freqs - lower) / (center - lower)
    down = (upper - freqs) / (upper - center)
    return torch.clamp(torch.minimum(up, down), min=0.0)


class MelSpectrogram(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("window", torch.hann_window(N_FFT))
        self.register_buffer("fb", mel_filterbank(N_FFT // 2 + 1, N_MELS, SR))

    def forward(self, audio):
        spec = torch.stft(audio, N_FFT, HOP, window=self.window, return_complex=True).abs() ** 2
        return self.fb @ spec


class PyhaDF_Dataset(Dataset):
    def __init__(self, recordings, annotations, config, train=True):
        self.recordings, self.samples, self.config, self.train = recordings, annotations, config, train
        self.num_classes, self.num_samples = N_CLASSES, N_SAMPLES
        self.mel_spectogram = MelSpectrogram()
        self.gen = torch.Generator().manual_seed(11 if train else 12)

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        rec_id, offset, duration, label = self.samples[index]
        audio = self.recordings[rec_id][offset:offset + duration]
        target = F.one_hot(torch.tensor(label), self.num_classes).float()
        if audio.shape[0] > self.num_samples:
            audio = audio[:self.num_samples]
        if audio.shape[0] < self.num_samples:
            audio = F.pad(audio, (0, self.num_samples - audio.shape[0]))
        if self.train and torch.rand(1, generator=self.gen) < self.config["time_shift_p"]:
            audio = torch.roll(audio, int(torch.randint(0, self.num_samples, (1,), generator=self.gen)))
        if self.train and torch.rand(1, generator=self.gen) < self.config["noise_p"]:
            audio = audio + torch.randn(audio.shape, generator=self.gen) * self.config["noise_std"]
        mel = self.mel_spectogram(audio)
        image = torch.stack([mel, mel, mel])
        max_val = torch.abs(image).max()
        image = image / max_val
        if self.train and torch.rand(1, generator=self.gen) < self.config["freq_mask_p"]:
            f0 = int(torch.randint(0, N_MELS - 4, (1,), generator=self.gen))
            image[:, f0:f0 + 4] = 0
        if self.train and torch.rand(1, generator=self.gen) < self.config["time_mask_p"]:
            t0 = int(torch.randint(0, image.shape[-1] - 4, (1,), generator=self.gen))
            image[:, :, t0:t0 + 4] = 0
        return image, target


class GeM(nn.Module):
    def __init__(self, p=3.0, eps=1e-6):
        super().__init__()
        self.p, self.eps = nn.Parameter(torch.ones(1) * p), eps

    def forward(self, x):
        return F.avg_pool2d(x.clamp(min=self.eps).pow(self.p), x.shape[-2:]).pow(1.0 / self.p)


class BirdCLEFModel(nn.Module):
    def __init__(self, num_classes=N_CLASSES):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU())
        self.pooling = GeM()
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.fc(self.pooling(self.features(x)).flatten(1))


loss_fn = nn.CrossEntropyLoss()


def train(model, data_loader, optimizer, scheduler, device, step, best_valid_cmap, epoch):
    model.train()
    running_loss, log_loss, log_n, correct, total = 0.0, 0.0, 0, 0, 0
    for i, (mels, labels) in enumerate(data_loader):
        optimizer.zero_grad()
        mels, labels = mels.to(device), labels.to(device)
        outputs = model(mels)
        loss = loss_fn(outputs, labels)
        loss.backward()
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        running_loss += loss.item()
        total += labels.size(0)
        correct += (outputs.argmax(1) == labels.argmax(1)).sum().item()
        log_loss += loss.item()
        log_n += 1
        if i % 10 == 0 or i == len(data_loader) - 1:
            print(f"epoch {epoch} step {step}: loss {log_loss / log_n:.4f} accuracy {100.0 * correct / total:.1f}")
            log_loss, log_n, correct, total = 0.0, 0, 0, 0
        step += 1
    return running_loss / len(data_loader), step, best_valid_cmap


def average_precision(scores, targets):
    order = scores.argsort(descending=True)
    hits = targets[order]
    if hits.sum() == 0:
        return float("nan")
    precision = hits.cumsum(0) / torch.arange(1, len(hits) + 1)
    return float((precision * hits).sum() / hits.sum())


def valid(model, data_loader, device):
    model.eval()
    running_loss, pred, label = 0.0, [], []
    with torch.no_grad():
        for mels, labels in data_loader:
            outputs = model(mels.to(device))
            running_loss += loss_fn(outputs, labels).item()
            pred.append(outputs)
            label.append(labels)
    pred, label = torch.cat(pred), torch.cat(label)
    aps = [average_precision(pred[:, c], label[:, c]) for c in range(N_CLASSES)]
    return running_loss / len(data_loader), sum(aps) / len(aps)


def make_recordings(n_rec=24, seconds=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(SR * seconds) / SR
    recordings, annotations = [], []
    for r in range(n_rec):
        species = r % N_CLASSES
        f0 = 400.0 + 450.0 * species
        call = torch.sin(2 * math.pi * (f0 + 80 * torch.sin(2 * math.pi * 3 * t)) * t)
        gate = (torch.sin(2 * math.pi * (1.5 + 0.3 * species) * t) > 0).float()
        audio = 0.5 * call * gate + 0.05 * torch.randn(t.shape, generator=g)
        if r % 12 == 5:  # recorder dropped out: a stretch of digital silence
            audio[SR:2 * SR] = 0.0
        recordings.append(audio)
        for k in range(0, SR * seconds - N_SAMPLES, N_SAMPLES // 4):
            annotations.append((r, k, N_SAMPLES, species))
    return recordings, annotations


def main():
    torch.manual_seed(0)
    device = "cpu"
    config = {"time_shift_p": 0.3, "noise_p": 0.2, "noise_std": 0.02, "freq_mask_p": 0.3, "time_mask_p": 0.3}
    recordings, annotations = make_recordings()
    perm = torch.randperm(len(annotations), generator=torch.Generator().manual_seed(3)).tolist()
    n_val = len(annotations) // 5
    val_ann = [annotations[i] for i in perm[:n_val]]
    train_ann = [annotations[i] for i in perm[n_val:]]
    train_dataset = PyhaDF_Dataset(recordings, train_ann, config, train=True)
    val_dataset = PyhaDF_Dataset(recordings, val_ann, config, train=False)
    train_dataloader = DataLoader(train_dataset, batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(0))
    val_dataloader = DataLoader(val_dataset, batch_size=16, shuffle=False)
    model = BirdCLEFModel().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    step, best_valid_cmap = 0, 0.0
    for epoch in range(3):
        train_loss, step, best_valid_cmap = train(model, train_dataloader, optimizer, None, device, step,
                                                  best_valid_cmap, epoch)
        valid_loss, valid_map = valid(model, val_dataloader, device)
        print(f"epoch {epoch}: train loss {train_loss:.4f} | validation loss {valid_loss:.4f} mAP {valid_map:.3f}")


if __name__ == "__main__":
    main()
