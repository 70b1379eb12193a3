"""A deep active learning toolkit run on a two-class chest X-ray set: get_pneumonia() reads the
NORMAL and PNEUMONIA images of the train and test folders, shuffles each split with a fixed seed
and returns a Data object with a labelled mask; a Net wrapper trains a fresh small CNN each round
and entropy sampling picks the next queries. At the end of the loader the test arrays are built
from the training lists (X_te = np.array(X_tr), Y_te from Y_tr), so every round's testing accuracy
is measured on the training pool, including the images the model was trained on.

Thread: https://github.com/SineZHAN/deepALplus/issues/7
"""
import random

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
np.random.seed(0)


def read_folder(n, label, seed):  # stands in for cv2.imread + resize of every file in a folder
    g = torch.Generator().manual_seed(seed)
    base = torch.zeros(16, 16)
    base[4:12, 4 + 4 * label:8 + 4 * label] = 0.12
    return [(base + 0.9 * torch.rand(16, 16, generator=g)).numpy() for _ in range(n)], [label] * n


def get_pneumonia():
    imgs_0, labels_0 = read_folder(300, 0, 1)
    imgs_1, labels_1 = read_folder(700, 1, 2)
    train_imgs, train_labels = imgs_0 + imgs_1, labels_0 + labels_1
    idx_train = list(range(len(train_imgs)))
    random.seed(4666)
    random.shuffle(idx_train)
    X_tr = np.array([train_imgs[i] for i in idx_train])
    Y_tr = torch.from_numpy(np.array([train_labels[i] for i in idx_train])).long()
    test_0, test_labels_0 = read_folder(120, 0, 3)
    test_1, test_labels_1 = read_folder(200, 1, 4)
    test_imgs, test_labels = test_0 + test_1, test_labels_0 + test_labels_1
    idx_test = list(range(len(test_imgs)))
    random.seed(4666)
    random.shuffle(idx_test)
    X_te = [test_imgs[i] for i in idx_test]
    Y_te = [test_labels[i] for i in idx_test]
    X_te = np.array(X_tr)
    Y_te = torch.from_numpy(np.array(Y_tr.numpy())).long()
    return Data(X_tr, Y_tr, X_te, Y_te)


class Data:
    def __init__(self, X_tr, Y_tr, X_te, Y_te):
        self.X_train, self.Y_train = torch.from_numpy(X_tr).unsqueeze(1), Y_tr
        self.X_test, self.Y_test = torch.from_numpy(X_te).unsqueeze(1), Y_te
        self.n_pool, self.n_test = len(X_tr), len(X_te)
        self.labeled_idxs = np.zeros(self.n_pool, dtype=bool)

    def initialize_labels(self, num):
        self.labeled_idxs[np.random.permutation(self.n_pool)[:num]] = True

    def cal_test_acc(self, preds):
        return (self.Y_test == preds).sum().item() / self.n_test


class Net:
    def train(self, x, y, n_epoch=4):
        self.clf = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                 nn.Flatten(), nn.Linear(8 * 8 * 8, 32), nn.ReLU(), nn.Linear(32, 2))
        optimizer = torch.optim.SGD(self.clf.parameters(), lr=0.05, momentum=0.9)
        self.clf.train()
        for _ in range(n_epoch):
            for idx in torch.randperm(len(y)).split(32):
                optimizer.zero_grad()
                loss = F.cross_entropy(self.clf(x[idx]), y[idx])
                loss.backward()
                optimizer.step()

    def predict_prob(self, x):
        self.clf.eval()
        with torch.no_grad():
            return F.softmax(self.clf(x), dim=1)


def main():
    dataset, net = get_pneumonia(), Net()
    dataset.initialize_labels(100)
    acc = []
    for rd in range(6):
        if rd > 0:
            unlabeled = np.arange(dataset.n_pool)[~dataset.labeled_idxs]
            probs = net.predict_prob(dataset.X_train[unlabeled])
            entropy = -(probs * probs.clamp_min(1e-12).log()).sum(1)
            dataset.labeled_idxs[unlabeled[entropy.sort(descending=True)[1][:50].numpy()]] = True
        labeled = np.arange(dataset.n_pool)[dataset.labeled_idxs]
        net.train(dataset.X_train[labeled], dataset.Y_train[labeled])
        acc.append(dataset.cal_test_acc(net.predict_prob(dataset.X_test).argmax(1)))
        print(f"Round {rd} labelled {len(labeled)} testing accuracy {acc[-1]:.3f}")


if __name__ == "__main__":
    main()
