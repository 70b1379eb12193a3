"""A callback-driven trainer: a BackwardCallback scales the loss with a GradScaler and calls
backward(), a ClipCallback built from a config applies torch.nn.utils.clip_grad_value_ through
functools.partial (clip_value=0.5), and a StepCallback calls scaler.step() and scaler.update().
Nothing unscales the gradients before the clip, so it cuts every element of the scaled gradient
(about 65536 times too large) to 0.5: after unscaling, the optimizer receives elements of about
1e-5 at most."""
import functools

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class BackwardCallback:
    def __call__(self, state):
        state["scaler"].scale(state["loss"]).backward()


class ClipCallback:
    def __init__(self, clip_fn):
        self.clip_fn = clip_fn

    def __call__(self, state):
        self.clip_fn(state["model"].parameters())


class StepCallback:
    def __call__(self, state):
        state["scaler"].step(state["optimizer"])
        state["scaler"].update()
        state["optimizer"].zero_grad()


class Runner:
    def __init__(self, model, optimizer, callbacks):
        self.state = {"model": model, "optimizer": optimizer, "scaler": torch.amp.GradScaler("cpu")}
        self.callbacks = callbacks

    def train(self, loader, epochs):
        criterion = nn.CrossEntropyLoss()
        for _ in range(epochs):
            for x, y in loader:
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    self.state["loss"] = criterion(self.state["model"](x), y)
                for callback in self.callbacks:
                    callback(self.state)
        return self.state["loss"].item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(960, 20, generator=g)
    y = (x[:, :3].sum(1) > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, generator=g)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    clip = ClipCallback(functools.partial(nn.utils.clip_grad_value_, clip_value=0.5))
    runner = Runner(model, optimizer, [BackwardCallback(), clip, StepCallback()])
    print(f"loss {runner.train(loader, epochs=2):.3f}")


if __name__ == "__main__":
    main()
