"""
Shape: a DiffusionTrainer class built around a model that exposes add_noise/denoise and num_timesteps. The constructor moves the model to the device and creates AdamW; train_step(x, cond) does zero_grad, random timesteps, noising, optional concatenation of the condition, MSE on the predicted noise, backward, grad-norm clipping and step; train_epoch(loader, cond_loader) walks the data loader and fetches a condition batch for every step; fit() wraps tensors into TensorDatasets and shuffled DataLoaders and calls train_epoch and validate per epoch.
Bug: inside train_epoch the condition batch is taken with next(iter(cond_loader)) on every step, so a fresh loader iterator is started for every training batch and only its first batch is taken; the condition set is never walked through, and every step pays a full iterator start-up.
Thread: https://github.com/KanishJebaMathewM/Truxify/pull/4089
"""
import logging
from typing import Dict, Optional

import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset
from tqdm import tqdm

log = logging.getLogger(__name__)


class DiffusionTrainer:
    def __init__(self, net: nn.Module, device: str = "cuda" if torch.cuda.is_available() else "cpu",
                 lr: float = 1e-4, batch_size: int = 32):
        self.net = net.to(device)
        self.device = device
        self.batch_size = batch_size
        self.opt = optim.AdamW(net.parameters(), lr=lr)
        self.train_history = []
        self.val_history = []

    def train_step(self, x: torch.Tensor, cond: Optional[torch.Tensor] = None) -> float:
        self.net.train()
        self.opt.zero_grad()
        x = x.to(self.device)
        if cond is not None:
            cond = cond.to(self.device)
        steps = torch.randint(0, self.net.num_timesteps, (x.shape[0],), device=self.device)
        eps = torch.randn_like(x)
        noisy = self.net.add_noise(x, steps, eps)
        if cond is not None:
            noisy = torch.cat([noisy, cond], dim=-1)
        eps_hat = self.net.denoise(noisy, steps)
        loss = nn.MSELoss()(eps_hat, eps)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.net.parameters(), 1.0)
        self.opt.step()
        return loss.item()

    def train_epoch(self, loader: DataLoader, cond_loader: Optional[DataLoader] = None) -> float:
        total, count = 0.0, 0
        for _, x in enumerate(tqdm(loader, desc="train")):
            cond = None
            if cond_loader is not None:
                cond = next(iter(cond_loader))[0]
            total += self.train_step(x, cond)
            count += 1
        return total / count

    def validate(self, loader: DataLoader) -> float:
        self.net.eval()
        total, count = 0.0, 0
        with torch.no_grad():
            for batch in loader:
                x = batch[0].to(self.device)
                steps = torch.randint(0, self.net.num_timesteps, (x.shape[0],), device=self.device)
                eps = torch.randn_like(x)
                eps_hat = self.net.denoise(self.net.add_noise(x, steps, eps), steps)
                total += nn.MSELoss()(eps_hat, eps).item()
                count += 1
        return total / max(count, 1)

    def fit(self, train_x: torch.Tensor, epochs: int = 100, val_x: Optional[torch.Tensor] = None,
            cond_x: Optional[torch.Tensor] = None) -> Dict:
        train_loader = DataLoader(TensorDataset(train_x), batch_size=self.batch_size, shuffle=True)
        val_loader = None
        if val_x is not None:
            val_loader = DataLoader(TensorDataset(val_x), batch_size=self.batch_size, shuffle=False)
        cond_loader = None
        if cond_x is not None:
            cond_loader = DataLoader(TensorDataset(cond_x), batch_size=self.batch_size, shuffle=True)

        for epoch in range(epochs):
            tr = self.train_epoch(train_loader, cond_loader)
            self.train_history.append(tr)
            if val_loader is not None:
                self.val_history.append(self.validate(val_loader))
            if (epoch + 1) % 10 == 0:
                log.info("epoch %d/%d train %.4f", epoch + 1, epochs, tr)
        return {"train_losses": self.train_history, "val_losses": self.val_history}
