"""A speaker-embedding recipe in the style of a Brain class: SpeakerBrain.compute_forward(batch,
stage) runs feature normalization, an ECAPA-like TDNN embedding model and a cosine classifier;
compute_objectives(predictions, batch, stage) computes an additive-angular-margin (AAM) softmax
loss and then advances the triangular cyclic learning-rate scheduler with
lr_annealing.on_batch_end(optimizer). compute_objectives is also called for every validation
batch, and the scheduler call is not guarded by `stage == TRAIN`, so the validation batches tick
the per-step cyclic schedule as well and the learning rate drifts away from the planned curve.

Thread: https://github.com/speechbrain/speechbrain/pull/940
"""
import math
from enum import Enum

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Stage(Enum):
    TRAIN = 1
    VALID = 2


class CyclicLRScheduler:
    """Triangular cyclic lr, ticked once per batch through on_batch_end."""

    def __init__(self, base_lr=1e-5, max_lr=1e-3, step_size=40):
        self.base_lr, self.max_lr, self.step_size = base_lr, max_lr, step_size
        self.losses, self.clr_iterations = [], 0

    def clr(self, it):
        cycle = math.floor(1 + it / (2 * self.step_size))
        x = abs(it / self.step_size - 2 * cycle + 1)
        return self.base_lr + (self.max_lr - self.base_lr) * max(0.0, 1 - x)

    def on_batch_end(self, opt):
        self.clr_iterations += 1
        lr = self.clr(self.clr_iterations)
        for group in opt.param_groups:
            group["lr"] = lr


class TDNNBlock(nn.Module):
    def __init__(self, cin, cout, k, d):
        super().__init__()
        self.conv = nn.Conv1d(cin, cout, k, dilation=d, padding=d * (k - 1) // 2)
        self.norm = nn.BatchNorm1d(cout)

    def forward(self, x):
        return self.norm(F.relu(self.conv(x)))


class ECAPALike(nn.Module):
    def __init__(self, n_mels=24, channels=64, lin_neurons=32):
        super().__init__()
        self.blocks = nn.ModuleList([TDNNBlock(n_mels, channels, 5, 1), TDNNBlock(channels, channels, 3, 2),
                                     TDNNBlock(channels, channels, 3, 3)])
        self.mfa = TDNNBlock(channels * 3, channels * 3, 1, 1)
        self.att = nn.Sequential(nn.Conv1d(channels * 3, 32, 1), nn.Tanh(), nn.Conv1d(32, channels * 3, 1))
        self.asp_bn = nn.BatchNorm1d(channels * 6)
        self.fc = nn.Linear(channels * 6, lin_neurons)

    def forward(self, x):
        outs = []
        for block in self.blocks:
            x = block(x)
            outs.append(x)
        x = self.mfa(torch.cat(outs, dim=1))
        w = torch.softmax(self.att(x), dim=2)
        mean = (w * x).sum(dim=2)
        std = torch.sqrt(((w * x ** 2).sum(dim=2) - mean ** 2).clamp(min=1e-5))
        return self.fc(self.asp_bn(torch.cat([mean, std], dim=1)))


class CosineClassifier(nn.Module):
    def __init__(self, lin_neurons=32, out_neurons=20):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_neurons, lin_neurons) * 0.1)

    def forward(self, emb):
        return F.linear(F.normalize(emb), F.normalize(self.weight))


def aam_softmax_loss(cosine, targets, margin=0.2, scale=30.0):
    theta = torch.acos(cosine.clamp(-1 + 1e-7, 1 - 1e-7))
    target_logit = torch.cos(theta + margin)
    one_hot = F.one_hot(targets, cosine.shape[1]).bool()
    logits = scale * torch.where(one_hot, target_logit, cosine)
    return F.cross_entropy(logits, targets)


class SpeakerBrain:
    def __init__(self, modules, hparams, opt_class):
        self.modules, self.hparams = modules, hparams
        self.optimizer = opt_class(modules.parameters())
        self.step = 0

    def compute_forward(self, batch, stage):
        feats, _ = batch
        feats = feats - feats.mean(dim=2, keepdim=True)  # sentence-level mean normalization
        embeddings = self.modules["embedding_model"](feats)
        return self.modules["classifier"](embeddings)

    def compute_objectives(self, predictions, batch, stage):
        _, spkid = batch
        loss = self.hparams["compute_cost"](predictions, spkid)
        if hasattr(self.hparams["lr_annealing"], "on_batch_end"):
            self.hparams["lr_annealing"].on_batch_end(self.optimizer)
        if stage != Stage.TRAIN:
            self.error_count += (predictions.argmax(dim=1) != spkid).sum().item()
        return loss

    def fit_batch(self, batch):
        predictions = self.compute_forward(batch, Stage.TRAIN)
        loss = self.compute_objectives(predictions, batch, Stage.TRAIN)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()
        self.step += 1
        return loss.detach()

    def evaluate_batch(self, batch, stage):
        with torch.no_grad():
            predictions = self.compute_forward(batch, stage)
            return self.compute_objectives(predictions, batch, stage).detach()

    def fit(self, epochs, train_loader, valid_loader):
        for epoch in range(1, epochs + 1):
            self.modules.train()
            train_loss = sum(self.fit_batch(b) for b in train_loader) / len(train_loader)
            self.modules.eval()
            self.error_count = 0
            valid_loss = sum(self.evaluate_batch(b, Stage.VALID) for b in valid_loader) / len(valid_loader)
            lr = self.optimizer.param_groups[0]["lr"]
            print(f"epoch: {epoch}, lr: {lr:.2e} - train loss: {train_loss:.3f} - valid loss: {valid_loss:.3f}, "
                  f"valid error: {self.error_count / len(valid_loader.dataset):.3f}")


def speaker_data(n, n_spk=20, n_mels=24, frames=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    voices = torch.randn(n_spk, n_mels, 1, generator=torch.Generator().manual_seed(123))
    rates = 0.2 + 0.6 * torch.rand(n_spk, 1, 1, generator=torch.Generator().manual_seed(7))
    spk = torch.randint(0, n_spk, (n,), generator=g)
    phase = 6.28 * torch.rand(n, 1, 1, generator=g)
    t = torch.arange(frames).float()
    feats = 0.5 * voices[spk] * torch.cos(rates[spk] * t + phase) + torch.randn(n, n_mels, frames, generator=g)
    return TensorDataset(feats, spk)


def main():
    torch.manual_seed(0)
    modules = nn.ModuleDict({"embedding_model": ECAPALike(), "classifier": CosineClassifier()})
    hparams = {"compute_cost": aam_softmax_loss,
               "lr_annealing": CyclicLRScheduler(base_lr=1e-5, max_lr=2e-3, step_size=40)}
    brain = SpeakerBrain(modules, hparams, lambda p: torch.optim.Adam(p, lr=1e-3, weight_decay=2e-6))
    full = speaker_data(800)
    train_set, valid_set = torch.utils.data.random_split(full, [720, 80], generator=torch.Generator().manual_seed(1))
    train_loader = DataLoader(train_set, batch_size=32, shuffle=True, drop_last=True,
                              generator=torch.Generator().manual_seed(0))
    valid_loader = DataLoader(valid_set, batch_size=16)
    brain.fit(5, train_loader, valid_loader)


if __name__ == "__main__":
    main()
