"""A PreDiff-style VAE training module with manual optimization (Lightning shape): an
AutoencoderKL-like encoder/decoder with a diagonal Gaussian posterior, a LPIPS-free
LPIPSWithDiscriminator-style loss (L1 reconstruction + small KL weight, a patch discriminator
switched on after disc_start, hinge loss), configure_optimizers() returning a generator and a
discriminator Adam with their warmup schedulers, and training_step(batch, batch_idx) that runs
the autoencoder phase and then the discriminator phase. total_batch_size is reached with
micro-batches and accumulate_grad_batches; a minimal fit() loop plays the trainer's part and
validation reports reconstruction MSE.
The bug: each phase calls opt.zero_grad() right before manual_backward() on every micro-batch, and
only the step sits under `if (batch_idx + 1) % accumulate_grad_batches == 0`, so the gradients of
the first accumulate_grad_batches - 1 micro-batches are erased before they are ever used; every
optimizer step applies the gradient of a single micro-batch, not of total_batch_size samples.

Thread: https://github.com/gaozhihan/PreDiff/issues/32
"""
import torch
import torch.nn.functional as F
from torch import nn

OPTIM = {"total_batch_size": 32, "micro_batch_size": 4, "lr": 1e-3, "warmup": 10,
         "gradient_clip_val": 1.0, "max_epochs": 3, "kl_weight": 1e-4, "disc_start": 60, "disc_weight": 0.05}


class DiagonalGaussian:
    def __init__(self, moments):
        self.mean, logvar = moments.chunk(2, dim=1)
        self.logvar = logvar.clamp(-20, 10)

    def sample(self):
        return self.mean + torch.exp(0.5 * self.logvar) * torch.randn_like(self.mean)

    def kl(self):
        return 0.5 * (self.mean.pow(2) + self.logvar.exp() - 1 - self.logvar).sum(dim=[1, 2, 3])


class AutoencoderKL(nn.Module):
    def __init__(self, ch=16, z=4):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(1, ch, 3, 2, 1), nn.SiLU(), nn.Conv2d(ch, ch, 3, 2, 1), nn.SiLU(),
                                     nn.Conv2d(ch, 2 * z, 3, 1, 1))
        self.decoder = nn.Sequential(nn.Conv2d(z, ch, 3, 1, 1), nn.SiLU(), nn.Upsample(scale_factor=2),
                                     nn.Conv2d(ch, ch, 3, 1, 1), nn.SiLU(), nn.Upsample(scale_factor=2))
        self.conv_out = nn.Conv2d(ch, 1, 3, 1, 1)

    def forward(self, sample, sample_posterior=True):
        posterior = DiagonalGaussian(self.encoder(sample))
        zz = posterior.sample() if sample_posterior else posterior.mean
        return self.conv_out(self.decoder(zz)), posterior


class LossWithDiscriminator(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.discriminator = nn.Sequential(nn.Conv2d(1, 16, 4, 2, 1), nn.LeakyReLU(0.2),
                                           nn.Conv2d(16, 1, 4, 2, 1))

    def forward(self, target, pred, posterior, optimizer_idx, global_step):
        disc_on = global_step >= self.cfg["disc_start"]
        if optimizer_idx == 0:
            rec = (target - pred).abs().mean()
            kl = posterior.kl().mean() / target[0].numel()
            g = -self.discriminator(pred).mean() if disc_on else pred.sum() * 0
            return rec + self.cfg["kl_weight"] * kl + self.cfg["disc_weight"] * g, {"rec_loss": rec.item()}
        real, fake = self.discriminator(target.detach()), self.discriminator(pred.detach())
        d = 0.5 * (F.relu(1 - real).mean() + F.relu(1 + fake).mean())
        return d * float(disc_on), {"disc_loss": d.item()}


class VAEPLModule(nn.Module):
    def __init__(self, accumulate_grad_batches, cfg=OPTIM):
        super().__init__()
        self.cfg, self.accumulate_grad_batches = cfg, accumulate_grad_batches
        self.torch_nn_module = AutoencoderKL()
        self.loss = LossWithDiscriminator(cfg)
        self.global_step = 0

    def configure_optimizers(self):
        g_opt = torch.optim.Adam(self.torch_nn_module.parameters(), lr=self.cfg["lr"], betas=(0.5, 0.9))
        d_opt = torch.optim.Adam(self.loss.discriminator.parameters(), lr=self.cfg["lr"], betas=(0.5, 0.9))
        warm = lambda s: min(1.0, (s + 1) / self.cfg["warmup"])
        self._opts = (g_opt, d_opt)
        self._schs = (torch.optim.lr_scheduler.LambdaLR(g_opt, warm), torch.optim.lr_scheduler.LambdaLR(d_opt, warm))

    def optimizers(self):
        return self._opts

    def lr_schedulers(self):
        return self._schs

    def clip_gradients(self, opt, gradient_clip_val):
        params = [p for group in opt.param_groups for p in group["params"]]
        torch.nn.utils.clip_grad_norm_(params, gradient_clip_val)

    def training_step(self, batch, batch_idx):
        g_opt, d_opt = self.optimizers()
        g_sch, d_sch = self.lr_schedulers()
        pred, posterior = self.torch_nn_module(batch)

        aeloss, log_ae = self.loss(batch, pred, posterior, 0, self.global_step)
        g_opt.zero_grad()
        aeloss.backward()
        if (batch_idx + 1) % self.accumulate_grad_batches == 0:
            self.clip_gradients(g_opt, self.cfg["gradient_clip_val"])
            g_opt.step()
            g_sch.step()

        discloss, log_d = self.loss(batch, pred, posterior, 1, self.global_step)
        d_opt.zero_grad()
        discloss.backward()
        if (batch_idx + 1) % self.accumulate_grad_batches == 0:
            self.clip_gradients(d_opt, self.cfg["gradient_clip_val"])
            d_opt.step()
            d_sch.step()
            self.global_step += 1
        return {**log_ae, **log_d}

    @torch.no_grad()
    def validation_epoch(self, batches):
        self.eval()
        mse = sum(F.mse_loss(self.torch_nn_module(b, sample_posterior=False)[0], b).item() for b in batches)
        self.train()
        return mse / len(batches)


def radar_frames(n, seed, size=16):
    """Smooth precipitation-like fields: a few Gaussian cells on a zero background."""
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
    out = torch.zeros(n, 1, size, size)
    for i in range(n):
        for _ in range(int(torch.randint(1, 4, (1,), generator=g))):
            cy, cx = (torch.rand(2, generator=g) * size).tolist()
            s = 1.5 + 2.5 * torch.rand(1, generator=g).item()
            out[i, 0] += torch.rand(1, generator=g).item() * torch.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * s * s))
    return out.clamp(0, 1)


def fit(module, train, val, cfg):
    mb = cfg["micro_batch_size"]
    g = torch.Generator().manual_seed(3)
    for epoch in range(cfg["max_epochs"]):
        perm = torch.randperm(len(train), generator=g)
        for batch_idx in range(len(train) // mb):
            logs = module.training_step(train[perm[batch_idx * mb:(batch_idx + 1) * mb]], batch_idx)
            if batch_idx % 80 == 0:
                print(f"epoch {epoch} batch {batch_idx} step {module.global_step} rec {logs['rec_loss']:.4f}")
        print(f"epoch {epoch} optimizer steps {module.global_step} valid_mse {module.validation_epoch(val):.5f}")


def main():
    torch.manual_seed(0)
    cfg = OPTIM
    accumulate = cfg["total_batch_size"] // cfg["micro_batch_size"]
    module = VAEPLModule(accumulate_grad_batches=accumulate)
    module.configure_optimizers()
    train = radar_frames(1536, seed=0)
    val = radar_frames(128, seed=1).split(32)
    fit(module, train, val, cfg)


if __name__ == "__main__":
    main()
