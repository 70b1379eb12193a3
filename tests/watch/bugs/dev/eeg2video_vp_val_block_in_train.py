"""An EEG video-category classifier on per-second differential-entropy features (channels x
frequency bands), evaluated block-wise: the recording has 7 blocks, each showing every class, and
for each test_set_id the previous block is the validation block and the rest are for training.
The training set is built with `if i == test_set_id: continue`, so the validation block is
concatenated into the training data too. train(net, train_iter, val_iter, test_iter, ...) (xavier
init, AdamW, CrossEntropyLoss, an Accumulator for the running loss) keeps the weights with the best
validation accuracy, which is measured on data the model is fitting: validation accuracy climbs
to ~1 while test accuracy stays low, and the checkpoint choice means nothing.

Thread: https://github.com/XuanhaoLiu/EEG2Video/issues/35
"""
import copy

import numpy as np
import torch
from torch import nn
from torch.utils import data

###################################### Hyperparameters ###################################
batch_size = 64
num_epochs = 12
lr = 0.001
C = 16       # channels
T = 5        # frequency bands
N_BLOCKS, N_CLASSES, PER_CLASS = 7, 10, 10
run_device = "cpu"
##########################################################################################


def make_recording(seed=0):
    rng = np.random.default_rng(seed)
    class_templates = 0.5 * rng.standard_normal((N_CLASSES, C * T))
    blocks, labels = [], []
    for b in range(N_BLOCKS):
        drift = 0.5 * rng.standard_normal(C * T)
        order = rng.permutation(N_CLASSES)
        feats = []
        for k in order:
            clip = 1.2 * rng.standard_normal(C * T)          # the clip shown for this class in this block
            feats.append(class_templates[k] + clip + drift + 0.4 * rng.standard_normal((PER_CLASS, C * T)))
        blocks.append(np.concatenate(feats).astype(np.float32))
        labels.append(order.repeat(PER_CLASS))
    return blocks, labels


class GLMNet(nn.Module):
    """Global MLP over all channels plus a local MLP over an occipital subset, concatenated."""

    def __init__(self, out_dim, emb_dim=64, occipital=slice(10, 16)):
        super().__init__()
        self.occipital = occipital
        n_local = (occipital.stop - occipital.start) * T
        self.global_mlp = nn.Sequential(nn.Flatten(), nn.Linear(C * T, emb_dim), nn.GELU(), nn.Linear(emb_dim, emb_dim))
        self.local_mlp = nn.Sequential(nn.Flatten(), nn.Linear(n_local, emb_dim), nn.GELU(), nn.Linear(emb_dim, emb_dim))
        self.head = nn.Linear(2 * emb_dim, out_dim)

    def forward(self, x):
        return self.head(torch.cat([self.global_mlp(x), self.local_mlp(x[:, self.occipital])], dim=1))


class Accumulator:
    def __init__(self, n):
        self.data = [0.0] * n

    def add(self, *args):
        self.data = [a + float(b) for a, b in zip(self.data, args)]

    def __getitem__(self, idx):
        return self.data[idx]


def get_dataloader(x, y, istrain, seed=0):
    ds = data.TensorDataset(torch.tensor(x).reshape(-1, C, T), torch.tensor(y, dtype=torch.long))
    return data.DataLoader(ds, batch_size, shuffle=istrain, generator=torch.Generator().manual_seed(seed))


def cal_accuracy(y_hat, y):
    return (y_hat.argmax(dim=1) == y).sum()


def evaluate_accuracy(net, data_iter):
    net.eval()
    metric = Accumulator(2)
    with torch.no_grad():
        for X, y in data_iter:
            metric.add(cal_accuracy(net(X), y), y.numel())
    return metric[0] / metric[1]


def train(net, train_iter, val_iter, test_iter, num_epochs, lr, device):
    def init_weights(m):
        if type(m) == nn.Linear:
            nn.init.xavier_uniform_(m.weight)
    net.apply(init_weights)
    net.to(device)
    optimizer = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=0)
    loss = nn.CrossEntropyLoss()
    best_val_acc, best_state = 0.0, None
    for epoch in range(num_epochs):
        metric = Accumulator(3)
        net.train()
        for X, y in train_iter:
            optimizer.zero_grad()
            y_hat = net(X)
            l = loss(y_hat, y)
            l.backward()
            optimizer.step()
            metric.add(l.detach() * X.shape[0], cal_accuracy(y_hat, y), X.shape[0])
        test_acc = evaluate_accuracy(net, test_iter)
        val_acc = evaluate_accuracy(net, val_iter)
        if val_acc > best_val_acc:
            best_val_acc, best_state = val_acc, copy.deepcopy(net.state_dict())
        if epoch % 3 == 0:
            print(f"loss {metric[0] / metric[2]:.3f}, train acc {metric[1] / metric[2]:.3f}, "
                  f"val acc {val_acc:.3f}, test acc {test_acc:.3f}")
    net.load_state_dict(best_state)
    return best_val_acc


def main():
    torch.manual_seed(0)
    blocks, labels = make_recording()
    top1 = []
    for test_set_id in range(N_BLOCKS):
        val_set_id = test_set_id - 1
        if val_set_id < 0:
            val_set_id = N_BLOCKS - 1
        train_data, train_label = np.empty((0, C * T), np.float32), np.empty((0,), np.int64)
        for i in range(N_BLOCKS):
            if i == test_set_id:
                continue
            train_data = np.concatenate((train_data, blocks[i]))
            train_label = np.concatenate((train_label, labels[i]))
        mean, std = train_data.mean(0), train_data.std(0) + 1e-6
        norm = lambda a: ((a - mean) / std).astype(np.float32)
        train_iter = get_dataloader(norm(train_data), train_label, True, seed=test_set_id)
        val_iter = get_dataloader(norm(blocks[val_set_id]), labels[val_set_id], False)
        test_iter = get_dataloader(norm(blocks[test_set_id]), labels[test_set_id], False)
        net = GLMNet(out_dim=N_CLASSES)
        best_val = train(net, train_iter, val_iter, test_iter, num_epochs, lr, run_device)
        test_acc = evaluate_accuracy(net, test_iter)
        print(f"block {test_set_id}: best val acc {best_val:.3f}, test acc of that checkpoint {test_acc:.3f}")
        top1.append(test_acc)
    print("mean top-1 test acc over blocks:", round(float(np.mean(top1)), 3))


if __name__ == "__main__":
    main()
