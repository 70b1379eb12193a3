"""An audio-classification package: CNN1 (four Conv2d + BatchNorm2d + LeakyReLU + MaxPool blocks
over a mel spectrogram, then linear layers behind Dropout(0.75) and Dropout(0.5)) is trained by
train_and_validate(model, train_loader, valid_loader, loss_function, optimizer, epochs, cnn=True),
whose train() and validate() helpers switch train()/eval() correctly; the best model is kept and
stored as a pickled dict of its hyperparameters and state_dict. A classification-report step then
rebuilds the model with load_cnn() and calls test(model, dataloader, cnn=True), which loops over a
batch-size-1 loader without ever calling model.eval(): the rebuilt model is in training mode, so
dropout is active and BatchNorm normalizes each clip with its own statistics, and the reported
predictions are noisy and change from run to run.

Thread: https://github.com/tyiannak/deep_audio_features/pull/28
"""
import io
import pickle
from copy import deepcopy

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class CNN1(nn.Module):
    def __init__(self, height, width, output_dim=4, first_channels=8):
        super().__init__()
        self.height, self.width, self.output_dim, self.first_channels = height, width, output_dim, first_channels

        def block(cin, cout):
            return nn.Sequential(nn.Conv2d(cin, cout, 5, padding=2), nn.BatchNorm2d(cout),
                                 nn.LeakyReLU(), nn.MaxPool2d(2))
        c = first_channels
        self.conv_layer1, self.conv_layer2 = block(1, c), block(c, 2 * c)
        self.conv_layer3, self.conv_layer4 = block(2 * c, 4 * c), block(4 * c, 8 * c)
        self.linear_layer1 = nn.Sequential(nn.Dropout(0.75), nn.Linear(8 * c * (height // 16) * (width // 16), 128),
                                           nn.LeakyReLU())
        self.linear_layer2 = nn.Sequential(nn.Dropout(0.5), nn.Linear(128, 64), nn.LeakyReLU())
        self.linear_layer3 = nn.Sequential(nn.Linear(64, output_dim), nn.LeakyReLU())

    def forward(self, x):
        out = self.conv_layer4(self.conv_layer3(self.conv_layer2(self.conv_layer1(x))))
        out = out.view(out.size(0), -1)
        return self.linear_layer3(self.linear_layer2(self.linear_layer1(out)))


def load_cnn(model_file):
    model_params = pickle.load(model_file)
    model = CNN1(height=model_params["height"], width=model_params["width"], output_dim=model_params["output_dim"],
                 first_channels=model_params["first_channels"])
    model.load_state_dict(model_params["state_dict"])
    return model


def train(_epoch, dataloader, model, loss_function, optimizer, cnn=False):
    model.train()
    training_loss, correct = 0.0, 0
    for index, (inputs, labels, lengths) in enumerate(dataloader, 1):
        optimizer.zero_grad()
        y_pred = model.forward(inputs[:, np.newaxis, :, :])
        loss = loss_function(y_pred, labels)
        correct += (y_pred.argmax(1) == labels).sum().item()
        loss.backward()
        optimizer.step()
        training_loss += loss.item()
    return training_loss / len(dataloader.dataset), correct / len(dataloader.dataset) * 100


def validate(_epoch, dataloader, model, loss_function, cnn=False):
    model.eval()
    correct, valid_loss = 0, 0.0
    with torch.no_grad():
        for inputs, labels, lengths in dataloader:
            y_pred = model.forward(inputs[:, np.newaxis, :, :])
            valid_loss += loss_function(y_pred, labels).item()
            correct += (y_pred.argmax(1) == labels).sum().item()
    return valid_loss / len(dataloader.dataset), correct / len(dataloader.dataset)


def train_and_validate(model, train_loader, valid_loader, loss_function, optimizer, epochs, cnn=False):
    best_model, best_acc = None, -1.0
    for epoch in range(1, epochs + 1):
        train_loss, train_acc = train(epoch, train_loader, model, loss_function, optimizer, cnn=cnn)
        valid_loss, valid_acc = validate(epoch, valid_loader, model, loss_function, cnn=cnn)
        print(f"epoch {epoch}: train loss {train_loss:.4f} acc {train_acc:.1f}% | valid acc {valid_acc:.3f}")
        if valid_acc > best_acc:
            best_acc, best_model = valid_acc, deepcopy(model)
    return best_model


def test(model, dataloader, cnn=False, classifier=True):
    correct, y_pred, y_true = 0, [], []
    for inputs, labels, lengths in dataloader:
        out = model.forward(inputs[:, np.newaxis, :, :])
        y_pred.append(torch.argmax(out, -1).numpy())
        y_true.append(labels.numpy())
    return np.array(y_pred).flatten(), np.array(y_true).flatten()


def spectrogram_set(n, height=32, width=32, n_classes=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    bands = torch.linspace(0, 1, width)
    labels = torch.randint(0, n_classes, (n,), generator=g)
    centers = (labels.float() + 0.5) / n_classes
    x = torch.exp(-((bands - centers[:, None]) ** 2) / 0.01)[:, None, :].expand(n, height, width).clone()
    x += 0.6 * torch.randn(n, height, width, generator=g)
    return TensorDataset(x, labels, torch.full((n,), height))


def main():
    torch.manual_seed(0)
    train_loader = DataLoader(spectrogram_set(640, seed=0), batch_size=16, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    valid_loader = DataLoader(spectrogram_set(160, seed=1), batch_size=32)
    model = CNN1(height=32, width=32, output_dim=4)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    best_model = train_and_validate(model, train_loader, valid_loader, nn.CrossEntropyLoss(), optimizer,
                                    epochs=3, cnn=True)

    model_file = io.BytesIO()
    pickle.dump({"height": 32, "width": 32, "output_dim": 4, "first_channels": 8,
                 "state_dict": best_model.state_dict()}, model_file)
    model_file.seek(0)

    model = load_cnn(model_file)
    test_loader = DataLoader(spectrogram_set(160, seed=2), batch_size=1, drop_last=True, shuffle=True,
                             generator=torch.Generator().manual_seed(1))
    y_pred, y_true = test(model=model, dataloader=test_loader, cnn=True)
    print("Classification report:")
    for c in range(4):
        mask = y_true == c
        print(f"  class {c}: recall {(y_pred[mask] == c).mean():.2f} support {mask.sum()}")
    print(f"  accuracy {(y_pred == y_true).mean():.3f}")


if __name__ == "__main__":
    main()
