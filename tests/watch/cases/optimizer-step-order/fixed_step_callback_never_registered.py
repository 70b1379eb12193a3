"""A callback-driven Trainer: fit() runs the forward pass and backward() itself and leaves the
update to callbacks (on_after_backward hooks); the trainer is built with the OptimizerStep callback,
which calls step() and zero_grad(), and a logging callback."""
import torch
import torch.nn.functional as F
from torch import nn


class LossLogger:
    def __init__(self):
        self.history = []

    def on_after_backward(self, trainer, loss):
        self.history.append(loss.item())


class OptimizerStep:
    def on_after_backward(self, trainer, loss):
        trainer.optimizer.step()
        trainer.optimizer.zero_grad()


class Trainer:
    def __init__(self, model, optimizer, callbacks):
        self.model, self.optimizer, self.callbacks = model, optimizer, callbacks

    def fit(self, x, y, epochs, batch_size=32):
        for _ in range(epochs):
            for i in range(0, len(x), batch_size):
                loss = F.cross_entropy(self.model(x[i:i + batch_size]), y[i:i + batch_size])
                loss.backward()
                for callback in self.callbacks:
                    callback.on_after_backward(self, loss)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(480, 16, generator=g)
    y = (x[:, :4].sum(1) > 0).long()
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))
    logger = LossLogger()
    trainer = Trainer(model, torch.optim.Adam(model.parameters(), lr=1e-3), callbacks=[OptimizerStep(), logger])
    trainer.fit(x, y, epochs=3)
    print(f"first loss {logger.history[0]:.3f}, last loss {logger.history[-1]:.3f}")


if __name__ == "__main__":
    main()
