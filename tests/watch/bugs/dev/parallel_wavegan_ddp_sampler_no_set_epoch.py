"""A Parallel WaveGAN style vocoder Trainer class: dicts of models ("generator", "discriminator"),
optimizers and schedulers, a _train_step that updates the generator with a multi-resolution STFT
loss (the adversarial term and the discriminator only start after discriminator_train_start_steps)
and a _train_epoch that walks the train DataLoader until train_max_steps. For distributed training
the train loader gets a DistributedSampler(num_replicas=world_size, rank=rank, shuffle=True), but
the Trainer never calls sampler.set_epoch(epoch). The sampler seeds its shuffle with seed + epoch,
so every epoch replays exactly the same permutation: each rank sees the same fixed half of the
utterances in the same order, epoch after epoch. This script runs the rank-0 process of a
2-process job (the sampler needs no process group when num_replicas and rank are given).

Thread: https://github.com/kan-bayashi/ParallelWaveGAN/pull/187
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

HOP = 16


class AudioMelDataset(Dataset):
    """Synthetic utterances: a few harmonics per utterance, 'mel' = framewise log band energies."""

    def __init__(self, n_utts=64, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.items = []
        for _ in range(n_utts):
            frames = int(torch.randint(24, 40, (1,), generator=g))
            t = torch.arange(frames * HOP) / 4000.0
            f0 = 100 + 300 * torch.rand(1, generator=g)
            amp = torch.rand(3, generator=g)
            audio = sum(a * torch.sin(2 * torch.pi * f0 * (k + 1) * t) for k, a in enumerate(amp))
            audio = 0.3 * audio + 0.01 * torch.randn(audio.shape, generator=g)
            spec = torch.stft(audio, 32, HOP, window=torch.hann_window(32), return_complex=True).abs()
            mel = torch.log(spec[:, :frames] + 1e-3)
            self.items.append((audio, mel))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        return self.items[idx]


class Collater:
    def __init__(self, batch_max_steps=256, hop_size=HOP):
        self.batch_max_frames = batch_max_steps // hop_size
        self.hop_size = hop_size

    def __call__(self, batch):
        ys, cs = [], []
        for audio, mel in batch:
            start = int(torch.randint(0, mel.shape[1] - self.batch_max_frames + 1, (1,)))
            cs.append(mel[:, start:start + self.batch_max_frames])
            ys.append(audio[start * self.hop_size:(start + self.batch_max_frames) * self.hop_size])
        c = torch.stack(cs)
        z = torch.randn(c.shape[0], 1, c.shape[2] * self.hop_size)
        return (z, c), torch.stack(ys).unsqueeze(1)


class ParallelWaveGANGenerator(nn.Module):
    def __init__(self, aux_channels=17, channels=32):
        super().__init__()
        self.upsample = nn.Upsample(scale_factor=HOP, mode="nearest")
        self.aux = nn.Conv1d(aux_channels, channels, 1)
        self.first = nn.Conv1d(1, channels, 1)
        self.convs = nn.ModuleList([nn.Conv1d(channels, channels, 3, padding=d, dilation=d) for d in (1, 2, 4, 8)])
        self.last = nn.Conv1d(channels, 1, 1)

    def forward(self, z, c):
        aux = self.aux(self.upsample(c))
        x = self.first(z)
        for conv in self.convs:
            x = x + torch.tanh(conv(x) + aux)
        return self.last(x)


class ParallelWaveGANDiscriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv1d(1, 16, 3, padding=1), nn.LeakyReLU(0.2), nn.Conv1d(16, 1, 3, padding=1))

    def forward(self, x):
        return self.net(x)


class MultiResolutionSTFTLoss(nn.Module):
    def __init__(self, resolutions=((64, 16), (128, 32), (32, 8))):
        super().__init__()
        self.resolutions = resolutions

    def forward(self, y_hat, y):
        sc, mag = 0.0, 0.0
        for n_fft, hop in self.resolutions:
            w = torch.hann_window(n_fft)
            s_hat = torch.stft(y_hat, n_fft, hop, window=w, return_complex=True).abs().clamp(min=1e-7)
            s = torch.stft(y, n_fft, hop, window=w, return_complex=True).abs().clamp(min=1e-7)
            sc = sc + torch.norm(s - s_hat) / torch.norm(s)
            mag = mag + F.l1_loss(torch.log(s), torch.log(s_hat))
        return sc / len(self.resolutions), mag / len(self.resolutions)


class Trainer:
    def __init__(self, steps, epochs, data_loader, model, criterion, optimizer, scheduler, config):
        self.steps = steps
        self.epochs = epochs
        self.data_loader = data_loader
        self.model = model
        self.criterion = criterion
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.config = config
        self.finish_train = False
        self.total_train_loss = {}

    def run(self):
        while True:
            self._train_epoch()
            if self.finish_train:
                break
        print("Finished training.")

    def _train_step(self, batch):
        x, y = batch
        y_ = self.model["generator"](*x)
        sc_loss, mag_loss = self.criterion["stft"](y_.squeeze(1), y.squeeze(1))
        gen_loss = sc_loss + mag_loss
        if self.steps > self.config["discriminator_train_start_steps"]:
            p_ = self.model["discriminator"](y_)
            gen_loss = gen_loss + self.config["lambda_adv"] * self.criterion["mse"](p_, p_.new_ones(p_.size()))
        self.total_train_loss["train/generator_loss"] = self.total_train_loss.get("train/generator_loss", 0.0) + gen_loss.item()

        self.optimizer["generator"].zero_grad()
        gen_loss.backward()
        if self.config["generator_grad_norm"] > 0:
            torch.nn.utils.clip_grad_norm_(self.model["generator"].parameters(), self.config["generator_grad_norm"])
        self.optimizer["generator"].step()
        self.scheduler["generator"].step()

        if self.steps > self.config["discriminator_train_start_steps"]:
            with torch.no_grad():
                y_ = self.model["generator"](*x)
            p = self.model["discriminator"](y)
            p_ = self.model["discriminator"](y_.detach())
            dis_loss = self.criterion["mse"](p, p.new_ones(p.size())) + self.criterion["mse"](p_, p_.new_zeros(p_.size()))
            self.optimizer["discriminator"].zero_grad()
            dis_loss.backward()
            self.optimizer["discriminator"].step()
            self.scheduler["discriminator"].step()

        self.steps += 1
        self._check_train_finish()

    def _train_epoch(self):
        for train_steps_per_epoch, batch in enumerate(self.data_loader["train"], 1):
            self._train_step(batch)
            if self.config["rank"] == 0:
                self._check_log_interval()
            if self.finish_train:
                return
        self.epochs += 1
        self.train_steps_per_epoch = train_steps_per_epoch

    def _check_log_interval(self):
        if self.steps % self.config["log_interval_steps"] == 0:
            avg = self.total_train_loss["train/generator_loss"] / self.config["log_interval_steps"]
            print(f"(Steps: {self.steps}, epoch {self.epochs}) train/generator_loss = {avg:.4f}")
            self.total_train_loss = {}

    def _check_train_finish(self):
        if self.steps >= self.config["train_max_steps"]:
            self.finish_train = True


def main():
    torch.manual_seed(0)
    config = {"batch_size": 4, "discriminator_train_start_steps": 100000, "lambda_adv": 4.0,
              "generator_grad_norm": 10.0, "train_max_steps": 200, "log_interval_steps": 20,
              "distributed": True, "world_size": 2, "rank": 0}
    dataset = {"train": AudioMelDataset(64)}
    sampler = {"train": DistributedSampler(dataset=dataset["train"], num_replicas=config["world_size"],
                                           rank=config["rank"], shuffle=True)}
    data_loader = {"train": DataLoader(dataset["train"], batch_size=config["batch_size"], shuffle=False,
                                       sampler=sampler["train"], collate_fn=Collater())}
    model = {"generator": ParallelWaveGANGenerator(), "discriminator": ParallelWaveGANDiscriminator()}
    criterion = {"stft": MultiResolutionSTFTLoss(), "mse": nn.MSELoss()}
    optimizer = {"generator": torch.optim.Adam(model["generator"].parameters(), lr=1e-3),
                 "discriminator": torch.optim.Adam(model["discriminator"].parameters(), lr=5e-5)}
    scheduler = {"generator": torch.optim.lr_scheduler.StepLR(optimizer["generator"], step_size=100, gamma=0.5),
                 "discriminator": torch.optim.lr_scheduler.StepLR(optimizer["discriminator"], step_size=100, gamma=0.5)}
    trainer = Trainer(steps=0, epochs=0, data_loader=data_loader, model=model, criterion=criterion,
                      optimizer=optimizer, scheduler=scheduler, config=config)
    trainer.run()


if __name__ == "__main__":
    main()
