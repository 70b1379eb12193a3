"""A UCF101-style CRNN action classifier: every clip is a folder named v_<Action>_gXX_cYY (group XX
is the source recording, clip YY one cut from it); the script lists all clip names, derives the
action from each name, label-encodes it, does a random 75/25 train_test_split over the clip list, and
builds Dataset_CRNN objects that load the selected frames of a clip. An EncoderCNN embeds each frame,
a DecoderRNN (LSTM + two FC layers) classifies the sequence; train(log_interval, model, device,
train_loader, optimizer, epoch) and validation(model, device, optimizer, test_loader) are called once
per epoch, with the model passed as [cnn_encoder, rnn_decoder] and one Adam over both parameter
lists.

Bug: the split is done over individual clips, but several clips are cut from the same recording
(same group), so almost every validation clip has siblings from its recording in the training set.
The network can recognise the recording (background, actor, lighting) instead of the action, and the
validation accuracy measures that memorisation rather than generalisation to new recordings. The
repository author acknowledged the problem in the thread (clips of one video end up on both sides).

Thread: https://github.com/HHTseng/video-classification/issues/20
"""
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data as data

# EncoderCNN architecture
CNN_fc_hidden1, CNN_embed_dim = 64, 32
img_x, img_y = 12, 12
dropout_p = 0.0
# DecoderRNN architecture
RNN_hidden_layers, RNN_hidden_nodes, RNN_FC_dim = 1, 32, 32
# training parameters
k = 6
epochs = 6
batch_size = 12
learning_rate = 2e-3
log_interval = 10
selected_frames = list(range(6))


def make_recordings(seed=0, n_groups=8, clips_per_group=5):
    """Synthetic stand-in for the frame folders: returns {clip_name: frames (T, 1, H, W)}."""
    g = torch.Generator().manual_seed(seed)
    actions = ["ApplyEyeMakeup", "Basketball", "Biking", "Drumming", "Fencing", "JumpRope"][:k]
    action_motion = torch.randn(k, 1, img_x, img_y, generator=g) * 0.35
    store = {}
    for a, action in enumerate(actions):
        for grp in range(1, n_groups + 1):
            scene = torch.randn(1, img_x, img_y, generator=g) * 1.5   # background/actor of the recording
            for clip in range(1, clips_per_group + 1):
                frames = []
                for t in range(len(selected_frames)):
                    phase = np.sin(t / 2.0)
                    f = scene + phase * action_motion[a] + 0.5 * torch.randn(1, img_x, img_y, generator=g)
                    frames.append(f)
                store[f"v_{action}_g{grp:02d}_c{clip:02d}"] = torch.stack(frames)
    return store, actions


class LabelEncoder:
    def fit(self, names):
        self.classes_ = sorted(set(names))
        return self

    def transform(self, names):
        return np.array([self.classes_.index(n) for n in names])


def labels2cat(label_encoder, names):
    return label_encoder.transform(names)


def train_test_split(X, y, test_size=0.25, random_state=42):
    idx = list(range(len(X)))
    random.Random(random_state).shuffle(idx)
    n_test = int(round(test_size * len(X)))
    te, tr = idx[:n_test], idx[n_test:]
    return [X[i] for i in tr], [X[i] for i in te], [y[i] for i in tr], [y[i] for i in te]


class Dataset_CRNN(data.Dataset):
    def __init__(self, store, folders, labels, frames):
        self.store, self.folders, self.labels, self.frames = store, folders, labels, frames

    def __len__(self):
        return len(self.folders)

    def read_images(self, folder):
        return self.store[folder][self.frames]

    def __getitem__(self, index):
        X = self.read_images(self.folders[index])
        y = torch.LongTensor([self.labels[index]])
        return X, y


class EncoderCNN(nn.Module):
    def __init__(self, fc_hidden1=64, drop_p=0.0, CNN_embed_dim=32):
        super().__init__()
        self.conv1 = nn.Sequential(nn.Conv2d(1, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.conv2 = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.fc1 = nn.Linear(16 * 3 * 3, fc_hidden1)
        self.fc2 = nn.Linear(fc_hidden1, CNN_embed_dim)
        self.drop_p = drop_p

    def forward(self, x_3d):
        cnn_embed_seq = []
        for t in range(x_3d.size(1)):
            x = self.conv2(self.conv1(x_3d[:, t]))
            x = x.view(x.size(0), -1)
            x = F.relu(self.fc1(x))
            x = F.dropout(x, p=self.drop_p, training=self.training)
            cnn_embed_seq.append(self.fc2(x))
        return torch.stack(cnn_embed_seq, dim=0).transpose_(0, 1)


class DecoderRNN(nn.Module):
    def __init__(self, CNN_embed_dim=32, h_RNN_layers=1, h_RNN=32, h_FC_dim=32, drop_p=0.0, num_classes=6):
        super().__init__()
        self.LSTM = nn.LSTM(input_size=CNN_embed_dim, hidden_size=h_RNN, num_layers=h_RNN_layers,
                            batch_first=True)
        self.fc1 = nn.Linear(h_RNN, h_FC_dim)
        self.fc2 = nn.Linear(h_FC_dim, num_classes)
        self.drop_p = drop_p

    def forward(self, x_RNN):
        RNN_out, _ = self.LSTM(x_RNN, None)
        x = F.relu(self.fc1(RNN_out[:, -1, :]))
        x = F.dropout(x, p=self.drop_p, training=self.training)
        return self.fc2(x)


def train(log_interval, model, device, train_loader, optimizer, epoch):
    cnn_encoder, rnn_decoder = model
    cnn_encoder.train()
    rnn_decoder.train()
    losses, scores = [], []
    N_count = 0
    for batch_idx, (X, y) in enumerate(train_loader):
        X, y = X.to(device), y.to(device).view(-1, )
        N_count += X.size(0)
        optimizer.zero_grad()
        output = rnn_decoder(cnn_encoder(X))
        loss = F.cross_entropy(output, y)
        losses.append(loss.item())
        y_pred = torch.max(output, 1)[1]
        step_score = (y_pred == y).float().mean().item()
        scores.append(step_score)
        loss.backward()
        optimizer.step()
        if (batch_idx + 1) % log_interval == 0:
            print("Train Epoch: {} [{}/{}]\tLoss: {:.6f}, Accu: {:.2f}%".format(
                epoch + 1, N_count, len(train_loader.dataset), loss.item(), 100 * step_score))
    return losses, scores


def validation(model, device, optimizer, test_loader):
    cnn_encoder, rnn_decoder = model
    cnn_encoder.eval()
    rnn_decoder.eval()
    test_loss = 0
    all_y, all_y_pred = [], []
    with torch.no_grad():
        for X, y in test_loader:
            X, y = X.to(device), y.to(device).view(-1, )
            output = rnn_decoder(cnn_encoder(X))
            test_loss += F.cross_entropy(output, y, reduction="sum").item()
            y_pred = output.max(1, keepdim=True)[1]
            all_y.extend(y)
            all_y_pred.extend(y_pred)
    test_loss /= len(test_loader.dataset)
    all_y = torch.stack(all_y, dim=0)
    all_y_pred = torch.stack(all_y_pred, dim=0).view(-1)
    test_score = (all_y == all_y_pred).float().mean().item()
    print("\nTest set ({:d} samples): Average loss: {:.4f}, Accuracy: {:.2f}%\n".format(
        len(all_y), test_loss, 100 * test_score))
    return test_loss, test_score


def main():
    torch.manual_seed(0)
    device = torch.device("cpu")
    store, action_names = make_recordings()
    le = LabelEncoder().fit(action_names)

    actions, all_names = [], []
    for f in store.keys():
        loc1, loc2 = f.find("v_"), f.find("_g")
        actions.append(f[(loc1 + 2): loc2])
        all_names.append(f)
    all_X_list = all_names
    all_y_list = labels2cat(le, actions)

    train_list, test_list, train_label, test_label = train_test_split(all_X_list, all_y_list,
                                                                      test_size=0.25, random_state=42)
    train_set = Dataset_CRNN(store, train_list, train_label, selected_frames)
    valid_set = Dataset_CRNN(store, test_list, test_label, selected_frames)
    params = {"batch_size": batch_size, "shuffle": True}
    train_loader = data.DataLoader(train_set, **params)
    valid_loader = data.DataLoader(valid_set, **params)

    cnn_encoder = EncoderCNN(fc_hidden1=CNN_fc_hidden1, drop_p=dropout_p, CNN_embed_dim=CNN_embed_dim).to(device)
    rnn_decoder = DecoderRNN(CNN_embed_dim=CNN_embed_dim, h_RNN_layers=RNN_hidden_layers, h_RNN=RNN_hidden_nodes,
                             h_FC_dim=RNN_FC_dim, drop_p=dropout_p, num_classes=k).to(device)
    crnn_params = list(cnn_encoder.parameters()) + list(rnn_decoder.parameters())
    optimizer = torch.optim.Adam(crnn_params, lr=learning_rate)

    for epoch in range(epochs):
        train(log_interval, [cnn_encoder, rnn_decoder], device, train_loader, optimizer, epoch)
        validation([cnn_encoder, rnn_decoder], device, optimizer, valid_loader)


if __name__ == "__main__":
    main()
