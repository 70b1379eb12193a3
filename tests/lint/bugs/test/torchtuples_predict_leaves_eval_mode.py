"""
Shape: a Keras-like Model wrapper class around a torch net: __init__ stores net, loss and an optimizer (an
optimizer class is instantiated on net.parameters()); fit_dataloader(dataloader, epochs, callbacks) drives the
loop through a callback handler (on_epoch_start, on_batch_start, zero_grad, compute_metrics with the loss,
backward, before_step, optimizer.step, on_batch_end, on_epoch_end) and never calls net.train() itself; fit() builds
a shuffled DataLoader from tensors; score_in_batches_dataloader switches to eval and back to train;
predict_dataloader(dataloader, eval_=True) switches the net to eval for prediction; a user script alternates fit()
and predict() on a validation set.
Bug: predict_dataloader calls self.net.eval() again at the end where it should call self.net.train(), so after the
first prediction every later fit() runs with dropout off and BatchNorm frozen on its running statistics.
Thread: https://github.com/havakv/torchtuples/pull/9
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class CallbackHandler:
    def __init__(self, callbacks):
        self.callbacks = callbacks

    def _call(self, name):
        return any(bool(getattr(cb, name)()) for cb in self.callbacks if hasattr(cb, name))

    def __getattr__(self, name):
        return lambda: self._call(name)


class Model:
    def __init__(self, net, loss=None, optimizer=None, device=None):
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.net = net.to(self.device)
        self.loss = loss
        if optimizer is None:
            optimizer = torch.optim.AdamW
        self.optimizer = optimizer(self.net.parameters()) if isinstance(optimizer, type) else optimizer

    def compute_metrics(self, inp, target):
        inp, target = inp.to(self.device), target.to(self.device)
        out = self.net(inp)
        return {"loss": self.loss(out, target)}

    def fit_dataloader(self, dataloader, epochs=1, callbacks=None):
        hooks = CallbackHandler(callbacks or [])
        stop = hooks.on_fit_start()
        for _ in range(epochs):
            if stop:
                break
            stop = hooks.on_epoch_start()
            for inp, target in dataloader:
                if hooks.on_batch_start():
                    break
                self.optimizer.zero_grad()
                self.batch_metrics = self.compute_metrics(inp, target)
                self.batch_loss = self.batch_metrics["loss"]
                self.batch_loss.backward()
                if hooks.before_step():
                    break
                self.optimizer.step()
                hooks.on_batch_end()
            else:
                stop = hooks.on_epoch_end()
        hooks.on_fit_end()

    def fit(self, inp, target, batch_size=256, epochs=1, callbacks=None):
        ds = TensorDataset(torch.as_tensor(inp, dtype=torch.float32), torch.as_tensor(target))
        loader = DataLoader(ds, batch_size=batch_size, shuffle=True)
        self.fit_dataloader(loader, epochs, callbacks)

    def score_in_batches_dataloader(self, dataloader, eval_=True):
        if eval_:
            self.net.eval()
        with torch.no_grad():
            scores = [self.compute_metrics(x, y)["loss"].item() for x, y in dataloader]
        if eval_:
            self.net.train()
        return float(np.mean(scores))

    def predict_dataloader(self, dataloader, eval_=True, grads=False):
        if eval_:
            self.net.eval()
        with torch.set_grad_enabled(grads):
            preds = [self.net(x.to(self.device)).cpu() for (x,) in dataloader]
        if eval_:
            self.net.eval()
        return torch.cat(preds)

    def predict(self, inp, batch_size=8224, eval_=True):
        loader = DataLoader(TensorDataset(torch.as_tensor(inp, dtype=torch.float32)), batch_size=batch_size)
        return self.predict_dataloader(loader, eval_=eval_).numpy()


class SurvNet(nn.Module):
    def __init__(self, n_in, n_hidden, n_out):
        super().__init__()
        self.block = nn.Sequential(nn.Linear(n_in, n_hidden), nn.ReLU(), nn.BatchNorm1d(n_hidden), nn.Dropout(0.1))
        self.out = nn.Linear(n_hidden, n_out)

    def forward(self, x):
        return self.out(self.block(x))


if __name__ == "__main__":
    x_tr, y_tr = np.random.randn(2048, 9).astype("float32"), np.random.randint(0, 10, 2048)
    x_va, y_va = np.random.randn(512, 9).astype("float32"), np.random.randint(0, 10, 512)
    model = Model(SurvNet(9, 32, 10), F.cross_entropy, torch.optim.Adam)
    for rnd in range(20):
        model.fit(x_tr, y_tr, batch_size=256, epochs=1)
        acc = (model.predict(x_va).argmax(1) == y_va).mean()
        print(f"round {rnd}: val acc {acc:.3f}")
