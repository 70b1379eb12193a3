"""
Shape: A small MNIST conv net (Dropout2d + functional dropout) built with Net().to(device) and SGD
with momentum; train() and test() helpers take model, device, numpy arrays and optimizer, slice the
arrays into 256-sample batches and call F.cross_entropy on the model output. The same helpers are
reused for several permuted-MNIST tasks.
Bug: the net's forward returns F.log_softmax(..., dim=1), and that output is what train()/test() hand to
F.cross_entropy, which runs log_softmax itself; the model should return raw logits.
Thread: https://github.com/ContinualAI/colab/pull/4
"""
import numpy as np
import torch
from torch import nn, optim
from torch.nn import functional as F


class MnistConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 10, kernel_size=5)
        self.c2 = nn.Conv2d(10, 20, kernel_size=5)
        self.c2_drop = nn.Dropout2d()
        self.h1 = nn.Linear(320, 50)
        self.h2 = nn.Linear(50, 10)

    def forward(self, img):
        h = F.relu(F.max_pool2d(self.c1(img), 2))
        h = F.relu(F.max_pool2d(self.c2_drop(self.c2(h)), 2))
        h = h.view(-1, 320)
        h = F.relu(self.h1(h))
        h = F.dropout(h, p=0.5, training=self.training)
        scores = self.h2(h)
        return F.log_softmax(scores, dim=1)


def train(model, device, xs, ys, optimizer, epoch, bs=256):
    model.train()
    for lo in range(0, len(ys) - 1, bs):
        hi = lo + bs
        data = torch.from_numpy(xs[lo:hi]).to(device)
        target = torch.from_numpy(ys[lo:hi]).long().to(device)
        optimizer.zero_grad()
        out = model(data)
        loss = F.cross_entropy(out, target)
        loss.backward()
        optimizer.step()
    print("epoch", epoch, "loss", loss.item())


def test(model, device, xs, ys, bs=256):
    model.eval()
    total, hits = 0.0, 0
    for lo in range(0, len(ys) - 1, bs):
        hi = lo + bs
        with torch.no_grad():
            data = torch.from_numpy(xs[lo:hi]).to(device)
            target = torch.from_numpy(ys[lo:hi]).long().to(device)
            out = model(data)
            total += F.cross_entropy(out, target).item()
            guess = out.max(1, keepdim=True)[1]
            hits += guess.eq(target.view_as(guess)).sum().item()
    acc = 100.0 * hits / len(ys)
    print("test loss", total / len(ys), "acc", acc)
    return acc


def permute(arrays, seed, side=28):
    rng = np.random.RandomState(seed)
    order = rng.permutation(side * side)
    out = []
    for arr in arrays:
        flat = arr.reshape(arr.shape[0], side * side)
        out.append(flat[:, order].reshape(arr.shape[0], 1, side, side))
    return out


def run_naive(tasks, device):
    model = MnistConvNet().to(device)
    optimizer = optim.SGD(params=model.parameters(), lr=1e-2, momentum=0.9)
    averages = []
    for task_id, ((xs, ys), _) in enumerate(tasks):
        for ep in range(1):
            train(model, device, xs, ys, optimizer, ep + 1)
        score = 0.0
        for _, (x_te, y_te) in tasks:
            score += test(model, device, x_te, y_te)
        averages.append(score / len(tasks))
    return averages


def main(x_train, t_train, x_test, t_test):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(1)
    tasks = [((x_train, t_train), (x_test, t_test))]
    for seed in (1, 2):
        x_tr, x_te = permute([x_train, x_test], seed)
        tasks.append(((x_tr, t_train), (x_te, t_test)))
    return run_naive(tasks, device)
