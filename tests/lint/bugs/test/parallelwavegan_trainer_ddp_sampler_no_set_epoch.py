"""
Shape: GAN vocoder training script: a Trainer class taking dicts of data loaders, models (generator,
discriminator), criteria (multi-resolution STFT, MSE), optimizers and schedulers plus a config dict; run() loops
_train_epoch() until a step budget is reached; _train_step does a generator update (STFT loss plus an adversarial
term after a warm-up step, grad-norm clipping, optimizer and scheduler step) and a discriminator update; main()
parses arguments, initialises NCCL distributed training when launched on several GPUs, builds a DistributedSampler
for the train and dev datasets, passes them to the DataLoaders, wraps both models in DistributedDataParallel and
constructs the Trainer with the loader dict only.
Bug: the DistributedSampler is created with shuffle=True but the Trainer never receives it and nothing calls
set_epoch() between epochs, so every rank walks its shard in the same order in every epoch.
Thread: https://github.com/kan-bayashi/ParallelWaveGAN/issues/177
"""
import argparse

import torch
import yaml
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

from parallel_wavegan.datasets import AudioMelDataset
from parallel_wavegan.losses import MultiResolutionSTFTLoss
from parallel_wavegan.models import ParallelWaveGANDiscriminator, ParallelWaveGANGenerator
from parallel_wavegan.optimizers import RAdam
from parallel_wavegan.utils import Collater


class Trainer:
    def __init__(self, steps, epochs, data_loader, model, criterion, optimizer, scheduler, config, device):
        self.steps = steps
        self.epochs = epochs
        self.data_loader = data_loader
        self.model = model
        self.criterion = criterion
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.config = config
        self.device = device
        self.finish_train = False

    def run(self):
        while not self.finish_train:
            self._train_epoch()

    def _train_step(self, batch):
        x, y = batch
        x = tuple(t.to(self.device) for t in x)
        y = y.to(self.device)
        y_hat = self.model["gen"](*x)
        sc_loss, mag_loss = self.criterion["stft"](y_hat.squeeze(1), y.squeeze(1))
        g_loss = sc_loss + mag_loss
        if self.steps > self.config["disc_start_step"]:
            p_hat = self.model["disc"](y_hat)
            g_loss = g_loss + self.config["lambda_adv"] * self.criterion["mse"](p_hat, p_hat.new_ones(p_hat.size()))
        self.optimizer["gen"].zero_grad()
        g_loss.backward()
        if self.config["gen_clip_norm"] > 0:
            torch.nn.utils.clip_grad_norm_(self.model["gen"].parameters(), self.config["gen_clip_norm"])
        self.optimizer["gen"].step()
        self.scheduler["gen"].step()

        if self.steps > self.config["disc_start_step"]:
            with torch.no_grad():
                y_hat = self.model["gen"](*x)
            p_real = self.model["disc"](y)
            p_fake = self.model["disc"](y_hat.detach())
            d_loss = self.criterion["mse"](p_real, p_real.new_ones(p_real.size())) + \
                self.criterion["mse"](p_fake, p_fake.new_zeros(p_fake.size()))
            self.optimizer["disc"].zero_grad()
            d_loss.backward()
            self.optimizer["disc"].step()
            self.scheduler["disc"].step()
        self.steps += 1
        if self.steps >= self.config["max_train_steps"]:
            self.finish_train = True

    def _train_epoch(self):
        for batch in self.data_loader["train"]:
            self._train_step(batch)
            if self.finish_train:
                return
        self.epochs += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world-size", type=int, default=1)
    args = ap.parse_args()
    args.distributed = args.n_procs > 1
    device = torch.device("cuda")
    if args.distributed:
        torch.cuda.set_device(args.rank)
        torch.distributed.init_process_group("nccl", init_method="env://")
    with open(args.config) as f:
        cfg = yaml.load(f, Loader=yaml.Loader)

    sets = {"train": AudioMelDataset(cfg["train_dir"]), "dev": AudioMelDataset(cfg["dev_dir"])}
    train_sampler, valid_sampler = None, None
    if args.distributed:
        from torch.utils.data.distributed import DistributedSampler
        train_sampler = DistributedSampler(sets["train"], num_replicas=args.n_procs, rank=args.rank, shuffle=True)
        valid_sampler = DistributedSampler(sets["dev"], num_replicas=args.n_procs, rank=args.rank, shuffle=False)
    collate = Collater(batch_max_steps=cfg["batch_max_steps"], hop_size=cfg["hop_size"])
    loaders = {
        "train": DataLoader(sets["train"], shuffle=False if args.distributed else True, collate_fn=collate,
                            batch_size=cfg["batch_size"], num_workers=cfg["num_workers"], sampler=train_sampler),
        "dev": DataLoader(sets["dev"], shuffle=False, collate_fn=collate, batch_size=cfg["batch_size"],
                          num_workers=cfg["num_workers"], sampler=valid_sampler),
    }
    nets = {"generator": ParallelWaveGANGenerator(**cfg["generator_params"]).to(device),
            "discriminator": ParallelWaveGANDiscriminator(**cfg["discriminator_params"]).to(device)}
    losses = {"stft": MultiResolutionSTFTLoss(**cfg["stft_loss_params"]).to(device), "mse": torch.nn.MSELoss()}
    opts = {"generator": RAdam(nets["gen"].parameters(), **cfg["generator_optimizer_params"]),
            "discriminator": RAdam(nets["disc"].parameters(), **cfg["discriminator_optimizer_params"])}
    scheds = {k: torch.optim.lr_scheduler.StepLR(opts[k], **cfg[f"{k}_scheduler_params"]) for k in opts}
    if args.distributed:
        nets = {k: DistributedDataParallel(v) for k, v in nets.items()}
    trainer = Trainer(steps=0, epochs=0, data_loader=loaders, model=nets, criterion=losses, optimizer=opts,
                      scheduler=scheds, config=cfg, device=device)
    trainer.run()


if __name__ == "__main__":
    main()
