"""A CSDI-style conditional diffusion model for time-series anomaly detection, shaped like
NV-Tesseract's TSDiffuser_base: a config dict (model / diffusion sections), process_data() that
turns a batch dict into (observed_data, observed_mask, cond_mask), calc_loss() that draws a
diffusion step, noises the data and regresses the noise on the target positions,
set_input_to_diffmodel() that stacks the conditioning values with the noisy targets, impute()
that runs the reverse chain, and evaluate() that returns reconstructions and targets whose
residuals become anomaly scores. A train() helper fits it with Adam over epochs.

calc_loss() standardizes every window by its own mean and std before noising it, so the denoiser
only ever sees unit-scale windows; evaluate() passes the raw, unstandardized window straight to
impute(). At inference the conditioning values are on the sensors' own scale (levels around
20-40) and the imputed values come back on the unit scale, so the reconstructions are far from
the targets for every window and the residual-based anomaly scores are meaningless.

Thread: https://github.com/NVIDIA/NV-Tesseract/issues/40
"""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SensorWindows(Dataset):
    def __init__(self, n, K=4, L=16, seed=0):
        g = torch.Generator().manual_seed(seed)
        t = torch.arange(L).float()
        level = 20 + 20 * torch.rand(n, K, 1, generator=g)
        amp = 2 + 3 * torch.rand(n, K, 1, generator=g)
        freq = 0.2 + 0.3 * torch.rand(n, K, 1, generator=g)
        phase = 6.28 * torch.rand(n, K, 1, generator=g)
        self.data = level + amp * torch.sin(freq * t + phase) + 0.2 * torch.randn(n, K, L, generator=g)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        x = self.data[i]
        return {"observed_data": x, "observed_mask": torch.ones_like(x),
                "timepoints": torch.arange(x.shape[-1]).float()}


class DiffModel(nn.Module):
    def __init__(self, K, L, channels=128, num_steps=50):
        super().__init__()
        self.step_emb = nn.Embedding(num_steps, channels)
        self.inp = nn.Linear(2 * K * L, channels)
        self.body = nn.Sequential(nn.SiLU(), nn.Linear(channels, channels), nn.SiLU(), nn.Linear(channels, K * L))
        self.K, self.L = K, L

    def forward(self, total_input, t):
        B = total_input.shape[0]
        h = self.inp(total_input.reshape(B, -1)) + self.step_emb(t)
        return self.body(h).reshape(B, self.K, self.L)


class TSDiffuser_base(nn.Module):
    def __init__(self, target_dim, seq_len, config, ratio=0.5):
        super().__init__()
        self.ratio = ratio
        self.target_dim = target_dim
        cfg = config["diffusion"]
        self.num_steps = cfg["num_steps"]
        self.diffmodel = DiffModel(target_dim, seq_len, cfg["channels"], cfg["num_steps"])
        beta = torch.linspace(cfg["beta_start"] ** 0.5, cfg["beta_end"] ** 0.5, self.num_steps) ** 2
        self.register_buffer("beta", beta)
        self.register_buffer("alpha_hat", 1 - beta)
        self.register_buffer("alpha", torch.cumprod(1 - beta, 0))

    def process_data(self, batch):
        return batch["observed_data"].float(), batch["observed_mask"].float()

    def get_randmask(self, observed_mask):
        rand_for_mask = torch.rand_like(observed_mask) * observed_mask
        rand_for_mask = rand_for_mask.reshape(len(rand_for_mask), -1)
        for i in range(len(observed_mask)):
            num_masked = round(observed_mask[i].sum().item() * self.ratio)
            rand_for_mask[i][rand_for_mask[i].topk(num_masked).indices] = -1
        return (rand_for_mask > 0).reshape(observed_mask.shape).float()

    def set_input_to_diffmodel(self, noisy_data, observed_data, cond_mask):
        cond_obs = cond_mask * observed_data
        noisy_target = (1 - cond_mask) * noisy_data
        return torch.stack([cond_obs, noisy_target], dim=1)

    def calc_loss(self, observed_data, cond_mask, observed_mask, is_train=1):
        B = observed_data.shape[0]
        t = torch.randint(0, self.num_steps, [B])
        current_alpha = self.alpha[t].view(B, 1, 1)

        # per-window instance normalization before the forward diffusion
        data_mean = observed_data.mean(dim=(1, 2), keepdim=True)
        data_std = observed_data.std(dim=(1, 2), keepdim=True) + 1e-5
        observed_data = (observed_data - data_mean) / data_std
        observed_data = torch.clamp(observed_data, min=-10.0, max=10.0)

        noise = torch.randn_like(observed_data)
        noisy_data = current_alpha.sqrt() * observed_data + (1.0 - current_alpha).sqrt() * noise
        total_input = self.set_input_to_diffmodel(noisy_data, observed_data, cond_mask)
        predicted = self.diffmodel(total_input, t)
        target_mask = observed_mask - cond_mask
        residual = (noise - predicted) * target_mask
        return (residual ** 2).sum() / target_mask.sum().clamp(min=1.0)

    def forward(self, batch, is_train=1):
        observed_data, observed_mask = self.process_data(batch)
        cond_mask = self.get_randmask(observed_mask)
        return self.calc_loss(observed_data, cond_mask, observed_mask, is_train)

    @torch.no_grad()
    def impute(self, observed_data, cond_mask, n_samples=1):
        B, K, L = observed_data.shape
        samples = torch.zeros(B, n_samples, K, L)
        for i in range(n_samples):
            current_sample = torch.randn_like(observed_data)
            for t in range(self.num_steps - 1, -1, -1):
                diff_input = self.set_input_to_diffmodel(current_sample, observed_data, cond_mask)
                predicted = self.diffmodel(diff_input, torch.full((B,), t, dtype=torch.long))
                coeff1 = 1 / self.alpha_hat[t] ** 0.5
                coeff2 = (1 - self.alpha_hat[t]) / (1 - self.alpha[t]) ** 0.5
                current_sample = coeff1 * (current_sample - coeff2 * predicted)
                if t > 0:
                    sigma = ((1.0 - self.alpha[t - 1]) / (1.0 - self.alpha[t]) * self.beta[t]) ** 0.5
                    current_sample = current_sample + sigma * torch.randn_like(current_sample)
            samples[:, i] = current_sample
        return samples

    def evaluate(self, batch, n_samples=1):
        observed_data, observed_mask = self.process_data(batch)
        cond_mask = self.get_randmask(observed_mask)
        target_mask = observed_mask - cond_mask
        samples = self.impute(observed_data, cond_mask, n_samples)
        recon = samples.median(dim=1).values * target_mask + observed_data * cond_mask
        return recon, observed_data, target_mask


def train(model, config, train_loader, valid_loader=None):
    optimizer = torch.optim.Adam(model.parameters(), lr=config["train"]["lr"], weight_decay=1e-6)
    for epoch in range(config["train"]["epochs"]):
        model.train()
        avg_loss = 0.0
        for batch_no, train_batch in enumerate(train_loader, start=1):
            optimizer.zero_grad()
            loss = model(train_batch)
            loss.backward()
            avg_loss += loss.item()
            optimizer.step()
        print(f"epoch {epoch} avg_loss {avg_loss / batch_no:.4f}")


def main():
    torch.manual_seed(0)
    config = {"train": {"epochs": 40, "lr": 1e-3},
              "diffusion": {"num_steps": 50, "channels": 256, "beta_start": 1e-4, "beta_end": 0.2}}
    K, L = 4, 16
    train_loader = DataLoader(SensorWindows(512, K, L, seed=0), batch_size=32, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    test_loader = DataLoader(SensorWindows(128, K, L, seed=1), batch_size=128)
    model = TSDiffuser_base(K, L, config)
    train(model, config, train_loader)

    model.eval()
    maes, base = [], []
    for batch in test_loader:
        recon, target, target_mask = model.evaluate(batch, n_samples=1)
        n = target_mask.sum()
        maes.append(((recon - target).abs() * target_mask).sum() / n)
        cond = 1 - target_mask
        window_mean = (target * cond).sum((1, 2), keepdim=True) / cond.sum((1, 2), keepdim=True)
        base.append(((window_mean - target).abs() * target_mask).sum() / n)
    print(f"imputation MAE on held-out windows {torch.stack(maes).mean():.3f} "
          f"(window-mean baseline {torch.stack(base).mean():.3f})")


if __name__ == "__main__":
    main()
