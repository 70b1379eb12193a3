"""
Shape: video action-recognition LRCN: ConvLstm nn.Module composed of a frozen pretrained ResNet wrapper (only its new fc trainable), an Lstm wrapper that keeps its hidden state and exposes reset_hidden_state(), and an output nn.Sequential(Linear, Softmax(dim=-1)); an argparse main() builds train/val DataLoaders from a dict, Adam and nn.CrossEntropyLoss, and calls module-level train_model(model, dataset, dataloader, device, optimizer, criterion) and test_model(...), both going through a shared forward_step helper that resets the LSTM state and computes loss and accuracy.
Bug: the classifier head ends in nn.Softmax, and its probabilities are fed to nn.CrossEntropyLoss, which applies log-softmax again; the loss has a high floor and weak gradients, and the model converges slowly.
Thread: https://github.com/doronharitan/human_activity_recognition_LRCN/issues/4
"""
import argparse
import math

import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from torchvision import models
from tqdm import tqdm

from data import UCF101Dataset
from utils import split_data


class FrozenResnet(nn.Module):
    def __init__(self, latent_dim):
        super().__init__()
        self.backbone = models.resnet152(pretrained=True)
        for p in self.backbone.parameters():
            p.requires_grad = False
        self.backbone.fc = nn.Linear(self.backbone.fc.in_features, latent_dim)

    def forward(self, frames):
        return self.backbone(frames)


class Lstm(nn.Module):
    def __init__(self, latent_dim, hidden_size, num_layers, bidirectional):
        super().__init__()
        self.Lstm = nn.LSTM(latent_dim, hidden_size=hidden_size, num_layers=num_layers,
                            batch_first=True, bidirectional=bidirectional)
        self.hidden_state = None

    def reset_hidden_state(self):
        self.hidden_state = None

    def forward(self, seq):
        out, self.hidden_state = self.Lstm(seq, self.hidden_state)
        return out


class ConvLstm(nn.Module):
    def __init__(self, latent_dim, hidden_size, num_layers, bidirectional, n_class):
        super().__init__()
        self.conv_model = FrozenResnet(latent_dim)
        self.Lstm = Lstm(latent_dim, hidden_size, num_layers, bidirectional)
        width = 2 * hidden_size if bidirectional else hidden_size
        self.output_layer = nn.Sequential(
            nn.Linear(width, n_class),
            nn.Softmax(dim=-1),
        )

    def forward(self, clip):
        b, t, c, h, w = clip.shape
        feats = self.conv_model(clip.view(b * t, c, h, w))
        seq_out = self.Lstm(feats.view(b, t, -1))
        return self.output_layer(seq_out[:, -1, :])


def forward_step(model, clips, labels, criterion, mode=''):
    model.Lstm.reset_hidden_state()
    if mode == 'val':
        with torch.no_grad():
            scores = model(clips)
    else:
        scores = model(clips)
    loss = criterion(scores, labels)
    hits = (scores.detach().argmax(dim=1) == labels).cpu().numpy().sum()
    return loss, hits


def train_model(model, dataset, dataloader, device, optimizer, criterion):
    total_loss, total_hits = 0.0, 0
    model.train()
    with tqdm(total=math.ceil(len(dataset) / dataloader.batch_size)) as bar:
        for clips, labels in dataloader:
            clips, labels = clips.to(device), labels.to(device)
            optimizer.zero_grad()
            loss, hits = forward_step(model, clips, labels, criterion)
            total_loss += loss.item()
            total_hits += hits
            loss.backward()
            optimizer.step()
            bar.update(1)
    return total_loss, 100 * total_hits / len(dataset)


def test_model(model, dataset, dataloader, device, criterion):
    total_loss, total_hits = 0.0, 0
    model.eval()
    for clips, labels in dataloader:
        clips, labels = clips.to(device), labels.to(device)
        loss, hits = forward_step(model, clips, labels, criterion, mode='val')
        total_loss += loss.item()
        total_hits += hits
    return total_loss, 100 * total_hits / len(dataset)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--epochs', default=100, type=int)
    parser.add_argument('--batch-size', default=32, type=int)
    parser.add_argument('--lr', default=5e-4, type=float)
    parser.add_argument('--sampled_data_path', type=str)
    parser.add_argument('--ucf_list_root', type=str)
    parser.add_argument('--val_check_interval', default=5, type=int)
    args = parser.parse_args()
    device = torch.device('cuda:0' if torch.cuda.is_available() else 'cpu')

    train_names, val_names, _, label_map = split_data(args.ucf_list_root, 42, False)
    sets = {'train': UCF101Dataset(args.sampled_data_path, 5, train_names, mode='train'),
            'val': UCF101Dataset(args.sampled_data_path, 5, val_names, mode='val')}
    loaders = {k: DataLoader(sets[k], batch_size=args.batch_size, shuffle=True, num_workers=4) for k in sets}

    model = ConvLstm(512, 256, 2, True, len(label_map)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    criterion = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        tr_loss, tr_acc = train_model(model, sets['train'], loaders['train'], device, optimizer, criterion)
        print(epoch, tr_loss, tr_acc)
        if epoch % args.val_check_interval == 0:
            print(test_model(model, sets['val'], loaders['val'], device, criterion))


if __name__ == '__main__':
    main()
