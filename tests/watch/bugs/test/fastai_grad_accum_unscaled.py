"""A small Learner with callbacks: a GradientAccumulation callback skips optimizer.step() and
zero_grad() until n_acc samples have been seen, but nothing divides the loss by the number of
accumulated batches, so each step applies the sum of their gradients, n_acc/bs times too large.

Thread: https://github.com/fastai/fastai/issues/3023
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class CancelBatch(Exception):
    pass


class Callback:
    def before_fit(self, learn): pass
    def after_backward(self, learn): pass


class GradientAccumulation(Callback):
    def __init__(self, n_acc=128):
        self.n_acc = n_acc

    def before_fit(self, learn):
        self.count = 0

    def after_backward(self, learn):
        self.count += learn.xb.shape[0]
        if self.count < self.n_acc:
            raise CancelBatch()  # skip step and zero_grad: keep accumulating
        self.count = 0


class Learner:
    def __init__(self, dls, model, loss_func, lr, cbs=()):
        self.dls, self.model, self.loss_func, self.lr, self.cbs = dls, model, loss_func, lr, list(cbs)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=lr, momentum=0.9)

    def one_batch(self, xb, yb):
        self.xb, self.yb = xb, yb
        self.loss = self.loss_func(self.model(xb), yb)
        self.loss.backward()
        try:
            for cb in self.cbs:
                cb.after_backward(self)
        except CancelBatch:
            return
        self.opt.step()
        self.opt.zero_grad()

    def fit(self, n_epoch):
        for cb in self.cbs:
            cb.before_fit(self)
        for epoch in range(n_epoch):
            self.model.train()
            for xb, yb in self.dls:
                self.one_batch(xb, yb)
            print(f"epoch {epoch} loss {self.loss.item():.4f}")


def main():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4096, 16, generator=g)
    y = x @ torch.randn(16, 1, generator=g) + 0.1 * torch.randn(4096, 1, generator=g)
    dls = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    Learner(dls, model, nn.MSELoss(), lr=0.01, cbs=[GradientAccumulation(n_acc=64)]).fit(2)


if __name__ == "__main__":
    main()
