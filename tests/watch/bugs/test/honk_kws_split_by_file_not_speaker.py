"""A keyword-spotting port of the speech-commands example: SpeechDataset.splits(config) walks one
folder per word, whose files are named <speaker>_nohash_<n>.wav, and assigns each file to
train/dev/test by sha1(filename) % 100. The hash covers the whole file name, so the several takes
of one word by one speaker land in different splits and the same speakers appear in train, dev
and test; dev and test accuracy measure recognition of speakers already heard in training. A
SpeechModel (two Conv2d layers with max-pooling and dropout over MFCC frames) is trained by
train(config) with SGD and CrossEntropyLoss, evaluated on dev every dev_every epochs and on test
at the end.

Thread: https://github.com/castorini/honk/pull/22
"""
import hashlib

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data as data

FRAMES, N_DCT = 32, 20


def synthetic_speech_folder(seed=0, n_speakers=60, takes=4, words=("yes", "no", "up", "down", "left", "right")):
    """In-memory stand-in for the dataset folders: {word: {filename: mfcc tensor}}."""
    g = torch.Generator().manual_seed(seed)
    word_templates = {w: 0.45 * torch.randn(FRAMES, N_DCT, generator=g) for w in words}
    folder = {w: {} for w in words}
    for s in range(n_speakers):
        speaker = hashlib.md5(str(s).encode()).hexdigest()[:8]
        voice = 1.0 * torch.randn(1, N_DCT, generator=g)
        for w in words:
            rendition = word_templates[w] + 1.2 * torch.randn(FRAMES, N_DCT, generator=g) + voice
            for k in range(takes):
                folder[w][f"{speaker}_nohash_{k}.wav"] = rendition + 0.3 * torch.randn(FRAMES, N_DCT, generator=g)
    return folder


class SpeechDataset(data.Dataset):
    def __init__(self, items):
        super().__init__()
        self.audio_files = [x for x, _ in items]
        self.audio_labels = [y for _, y in items]

    @classmethod
    def splits(cls, config):
        folder = config["data_folder"]
        train_pct, dev_pct = config["train_pct"], config["dev_pct"]
        words = {word: i for i, word in enumerate(config["wanted_words"])}
        sets = [[], [], []]
        for folder_name, files in folder.items():
            label = words[folder_name]
            for filename, audio in files.items():
                bucket = int(hashlib.sha1(filename.encode()).hexdigest(), 16) % 100
                if bucket < train_pct:
                    tag = 0
                elif bucket < train_pct + dev_pct:
                    tag = 1
                else:
                    tag = 2
                sets[tag].append((audio, label))
        return tuple(cls(s) for s in sets)

    def __getitem__(self, index):
        return self.audio_files[index], self.audio_labels[index]

    def __len__(self):
        return len(self.audio_labels)


class SpeechModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, (8, 4))
        self.pool1 = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(16, 16, (4, 4))
        self.dropout = nn.Dropout(config["dropout_prob"])
        self.output = nn.Linear(16 * 9 * 5, config["n_labels"])

    def forward(self, x):
        x = self.pool1(self.dropout(F.relu(self.conv1(x.unsqueeze(1)))))
        x = self.dropout(F.relu(self.conv2(x)))
        return self.output(x.view(x.size(0), -1))


def print_eval(name, scores, labels, loss):
    accuracy = (scores.argmax(1) == labels).float().mean().item()
    print(f"{name} accuracy: {accuracy:>5.3f}, loss: {loss.item():<8.4f}")


def evaluate(config, model, test_loader):
    model.eval()
    criterion = nn.CrossEntropyLoss()
    with torch.no_grad():
        for model_in, labels in test_loader:
            scores = model(model_in)
            print_eval("test", scores, labels, criterion(scores, labels))


def train(config):
    train_set, dev_set, test_set = SpeechDataset.splits(config)
    model = SpeechModel(config)
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    train_loader = data.DataLoader(train_set, batch_size=config["batch_size"], shuffle=True, drop_last=True,
                                   generator=torch.Generator().manual_seed(config["seed"]))
    dev_loader = data.DataLoader(dev_set, batch_size=len(dev_set))
    test_loader = data.DataLoader(test_set, batch_size=len(test_set))
    step_no = 0
    for epoch_idx in range(config["n_epochs"]):
        for model_in, labels in train_loader:
            model.train()
            optimizer.zero_grad()
            scores = model(model_in)
            loss = criterion(scores, labels)
            loss.backward()
            optimizer.step()
            step_no += 1
            if step_no % 20 == 0:
                print_eval(f"train step #{step_no}", scores, labels, loss)
        if epoch_idx % config["dev_every"] == config["dev_every"] - 1:
            model.eval()
            with torch.no_grad():
                for model_in, labels in dev_loader:
                    scores = model(model_in)
                    print_eval("dev", scores, labels, criterion(scores, labels))
    evaluate(config, model, test_loader)


def main():
    torch.manual_seed(0)
    config = dict(data_folder=synthetic_speech_folder(), wanted_words=["yes", "no", "up", "down", "left", "right"],
                  train_pct=80, dev_pct=10, test_pct=10, n_labels=6, dropout_prob=0.5, lr=0.01,
                  batch_size=32, n_epochs=6, dev_every=2, seed=0)
    train(config)


if __name__ == "__main__":
    main()
