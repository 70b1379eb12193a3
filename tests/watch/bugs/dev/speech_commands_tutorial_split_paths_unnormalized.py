"""A keyword-spotting tutorial: a SubsetSC dataset class subclasses the speech-commands dataset and
builds its "training" subset by dropping every file listed in validation_list.txt and
testing_list.txt. Its load_list() helper joins the dataset root with each listed name, but the
walker of the parent dataset holds normalized paths while the joined names keep the "./" prefix,
so `w not in excludes` is always true: the training subset still contains every validation and
test clip. An M5-style Conv1d network with log_softmax is trained by train(model, epoch,
log_interval) with F.nll_loss, Adam and a StepLR stepped per epoch, and test(model, epoch) reports
an accuracy measured on clips the model was trained on.

Thread: https://github.com/pytorch/tutorials/issues/1830
"""
import os

import torch
import torch.nn.functional as F
from torch import nn

LABELS = ["yes", "no", "up", "down", "left", "right", "on", "off"]
ROOT = "./SpeechCommands/speech_commands_v0.02"
SAMPLES = 1000


class FakeSpeechCommands(torch.utils.data.Dataset):
    """In-memory stand-in for the downloaded archive: walker of normalized file paths + listing files."""

    def __init__(self, root=ROOT, n_speakers=70, takes=2, seed=0):
        g = torch.Generator().manual_seed(seed)
        self._path = root
        templates = {w: torch.randn(8, generator=g) for w in LABELS}
        self._audio, self._walker, self._lists = {}, [], {"validation_list.txt": [], "testing_list.txt": []}
        t = torch.linspace(0, 1, SAMPLES)
        for s in range(n_speakers):
            spk = f"{s:08x}"
            pitch = 1.0 + 0.4 * torch.rand(1, generator=g).item()
            for w in LABELS:
                for k in range(takes):
                    name = f"{w}/{spk}_nohash_{k}.wav"
                    freqs = 40 * pitch * (1 + torch.arange(8))
                    wave = (templates[w][:, None] * torch.sin(2 * torch.pi * freqs[:, None] * t)).sum(0)
                    wave = wave + 2.5 * torch.randn(SAMPLES, generator=g)
                    path = os.path.normpath(os.path.join(self._path, name))
                    self._audio[path] = (wave.unsqueeze(0), w, spk)
                    self._walker.append(path)
                    bucket = s % 10
                    if bucket == 0:
                        self._lists["validation_list.txt"].append(name)
                    elif bucket == 1:
                        self._lists["testing_list.txt"].append(name)

    def read_listing(self, filename):
        return list(self._lists[filename])

    def __getitem__(self, n):
        wave, label, spk = self._audio[os.path.normpath(self._walker[n])]  # the file system resolves "./"
        return wave, 8000, label, spk

    def __len__(self):
        return len(self._walker)


class SubsetSC(FakeSpeechCommands):
    def __init__(self, subset=None):
        super().__init__()

        def load_list(filename):
            return [os.path.join(self._path, line.strip()) for line in self.read_listing(filename)]

        if subset == "validation":
            self._walker = load_list("validation_list.txt")
        elif subset == "testing":
            self._walker = load_list("testing_list.txt")
        elif subset == "training":
            excludes = set(load_list("validation_list.txt") + load_list("testing_list.txt"))
            self._walker = [w for w in self._walker if w not in excludes]


def collate_fn(batch):
    waves = torch.stack([b[0] for b in batch])
    targets = torch.tensor([LABELS.index(b[2]) for b in batch])
    return waves, targets


class M5(nn.Module):
    def __init__(self, n_input=1, n_output=8, stride=8, n_channel=16):
        super().__init__()
        self.conv1 = nn.Conv1d(n_input, n_channel, kernel_size=40, stride=stride)
        self.bn1 = nn.BatchNorm1d(n_channel)
        self.pool1 = nn.MaxPool1d(4)
        self.conv2 = nn.Conv1d(n_channel, n_channel, kernel_size=3)
        self.bn2 = nn.BatchNorm1d(n_channel)
        self.pool2 = nn.MaxPool1d(4)
        self.fc1 = nn.Linear(n_channel, n_output)

    def forward(self, x):
        x = self.pool1(F.relu(self.bn1(self.conv1(x))))
        x = self.pool2(F.relu(self.bn2(self.conv2(x))))
        x = F.avg_pool1d(x, x.shape[-1]).permute(0, 2, 1)
        return F.log_softmax(self.fc1(x), dim=2)


torch.manual_seed(0)
train_set, test_set = SubsetSC("training"), SubsetSC("testing")
train_loader = torch.utils.data.DataLoader(train_set, batch_size=32, shuffle=True, collate_fn=collate_fn,
                                           generator=torch.Generator().manual_seed(0))
test_loader = torch.utils.data.DataLoader(test_set, batch_size=64, shuffle=False, collate_fn=collate_fn)
model = M5(n_output=len(LABELS))
optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=0.0001)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=20, gamma=0.1)


def train(model, epoch, log_interval):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        output = model(data)
        loss = F.nll_loss(output.squeeze(), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if batch_idx % log_interval == 0:
            print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(train_loader.dataset)}]\tLoss: {loss.item():.6f}")


def test(model, epoch):
    model.eval()
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            pred = model(data).argmax(dim=-1).squeeze()
            correct += pred.eq(target).sum().item()
    print(f"Test Epoch: {epoch}\tAccuracy: {correct}/{len(test_loader.dataset)} "
          f"({100. * correct / len(test_loader.dataset):.0f}%)")


if __name__ == "__main__":
    print(f"train clips {len(train_set)}, test clips {len(test_set)}")
    for epoch in range(1, 5):
        train(model, epoch, log_interval=10)
        test(model, epoch)
        scheduler.step()
