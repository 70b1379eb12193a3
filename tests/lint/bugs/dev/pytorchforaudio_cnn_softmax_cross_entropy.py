"""
Shape: course code split into cnn.py (CNNNetwork: four Conv-ReLU-MaxPool blocks in nn.Sequential attributes, Flatten, Linear, and an nn.Softmax(dim=1) attribute applied in forward) and train.py (create_data_loader, train_single_epoch(model, data_loader, loss_fn, optimiser, device), train(...) looping epochs; __main__ builds a mel-spectrogram UrbanSoundDataset, CNNNetwork().to(device), nn.CrossEntropyLoss() and Adam).
Bug: CNNNetwork.forward returns softmax probabilities and train_single_epoch feeds them to nn.CrossEntropyLoss, which applies log_softmax again.
Thread: https://github.com/musikalkemist/pytorchforaudio/pull/10
"""
import torch
import torchaudio
from torch import nn
from torch.utils.data import DataLoader

from urbansounddataset import UrbanSoundDataset

BATCH_SIZE = 128
EPOCHS = 10
LEARNING_RATE = 0.001
ANNOTATIONS_FILE = "UrbanSound8K/metadata/UrbanSound8K.csv"
AUDIO_DIR = "UrbanSound8K/audio"
SAMPLE_RATE = 22050
NUM_SAMPLES = 22050


class CNNNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Sequential(
            nn.Conv2d(in_channels=1, out_channels=16, kernel_size=3, stride=1, padding=2),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=2),
        )
        self.conv2 = nn.Sequential(
            nn.Conv2d(in_channels=16, out_channels=32, kernel_size=3, stride=1, padding=2),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=2),
        )
        self.conv3 = nn.Sequential(
            nn.Conv2d(in_channels=32, out_channels=64, kernel_size=3, stride=1, padding=2),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=2),
        )
        self.conv4 = nn.Sequential(
            nn.Conv2d(in_channels=64, out_channels=128, kernel_size=3, stride=1, padding=2),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=2),
        )
        self.flatten = nn.Flatten()
        self.linear = nn.Linear(128 * 5 * 4, 10)
        self.softmax = nn.Softmax(dim=1)

    def forward(self, input_data):
        x = self.conv1(input_data)
        x = self.conv2(x)
        x = self.conv3(x)
        x = self.conv4(x)
        logits = self.linear(self.flatten(x))
        predictions = self.softmax(logits)
        return predictions


def create_data_loader(train_data, batch_size):
    return DataLoader(train_data, batch_size=batch_size)


def train_single_epoch(model, data_loader, loss_fn, optimiser, device):
    for inputs, target in data_loader:
        inputs, target = inputs.to(device), target.to(device)
        prediction = model(inputs)
        loss = loss_fn(prediction, target)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return loss.item()


def train(model, data_loader, loss_fn, optimiser, device, epochs):
    for epoch in range(epochs):
        train_single_epoch(model, data_loader, loss_fn, optimiser, device)


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    mel = torchaudio.transforms.MelSpectrogram(sample_rate=SAMPLE_RATE, n_fft=1024, hop_length=512, n_mels=64)
    usd = UrbanSoundDataset(ANNOTATIONS_FILE, AUDIO_DIR, mel, SAMPLE_RATE, NUM_SAMPLES, device)
    train_dataloader = create_data_loader(usd, BATCH_SIZE)
    cnn = CNNNetwork().to(device)
    loss_fn = nn.CrossEntropyLoss()
    optimiser = torch.optim.Adam(cnn.parameters(), lr=LEARNING_RATE)
    train(cnn, train_dataloader, loss_fn, optimiser, device, EPOCHS)
    torch.save(cnn.state_dict(), "cnnnet.pth")
