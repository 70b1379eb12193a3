"""An Engine/Updater split in the RETURNN torch backend style: the Engine's train_epoch() runs the
model's train step, calls grad_scaler.scale(total_loss).backward() when mixed precision is on, and
hands over to Updater.update_params(grad_scaler=...). The updater applies the configured
gradient_clip_global_norm with clip_grad_norm_ and then calls grad_scaler.step(optimizer), which is
where the gradients are unscaled. The global-norm clip therefore acts on gradients multiplied by
the loss scale, so every step is clipped and then divided by the scale: the effective clip value
is gradient_clip_global_norm / 65536.

Thread: https://github.com/rwth-i6/returnn/issues/1590
"""
import torch
import torch.nn.functional as F
from torch import nn


class Updater:
    def __init__(self, config, network):
        self.config, self.network = config, network
        self.optimizer = torch.optim.Adam(network.parameters(), lr=config["learning_rate"],
                                          eps=config.get("adam_eps", 1e-8))

    def update_params(self, grad_scaler=None):
        gradient_clip_global_norm = self.config.get("gradient_clip_global_norm", 0.0)
        norm = None
        if gradient_clip_global_norm:
            norm = nn.utils.clip_grad_norm_(self.network.parameters(), gradient_clip_global_norm)
        if grad_scaler is not None:
            grad_scaler.step(self.optimizer)
            grad_scaler.update()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad()
        return norm


class Engine:
    def __init__(self, config, model, train_step):
        self.config, self.model, self.train_step = config, model, train_step
        self.updater = Updater(config, model)
        self.grad_scaler = torch.amp.GradScaler("cpu") if config.get("torch_amp") else None
        self.global_train_step = 0

    def train_epoch(self, epoch, dataset):
        self.model.train()
        for extern_data in dataset:
            total_loss = self.train_step(model=self.model, extern_data=extern_data)
            if self.grad_scaler is not None:
                self.grad_scaler.scale(total_loss).backward()
            else:
                total_loss.backward()
            norm = self.updater.update_params(grad_scaler=self.grad_scaler)
            if self.global_train_step % 20 == 0:
                print(f"ep {epoch} train step {self.global_train_step}: ce {total_loss.item():.4f} "
                      f"grad norm seen by the clip {norm.item():.3g}")
            self.global_train_step += 1


class FrameClassifier(nn.Module):
    def __init__(self, in_dim=40, hidden=128, num_labels=24):
        super().__init__()
        self.blstm = nn.LSTM(in_dim, hidden, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, num_labels)

    def forward(self, x):
        h, _ = self.blstm(x)
        return self.out(h)


def train_step(*, model, extern_data):
    logits = model(extern_data["data"])
    return F.cross_entropy(logits.flatten(0, 1), extern_data["classes"].flatten())


def frame_dataset(n_batches, batch_size=16, frames=30, in_dim=40, num_labels=24, seed=0):
    g = torch.Generator().manual_seed(seed)
    means = torch.randn(num_labels, in_dim, generator=torch.Generator().manual_seed(8))
    data = []
    for _ in range(n_batches):
        labels = torch.randint(0, num_labels, (batch_size, frames), generator=g)
        feats = means[labels] + 1.5 * torch.randn(batch_size, frames, in_dim, generator=g)
        data.append({"data": feats, "classes": labels})
    return data


def main():
    torch.manual_seed(0)
    config = {"learning_rate": 1e-3, "gradient_clip_global_norm": 5.0, "torch_amp": "float16"}
    engine = Engine(config, FrameClassifier(), train_step)
    dataset = frame_dataset(30)
    for epoch in range(1, 4):
        engine.train_epoch(epoch, dataset)


if __name__ == "__main__":
    main()
