"""An SDXL fine-tuning trainer in the style of a train_sdxl.py script: main(args) builds a conditional
denoiser, an AdamW optimizer with lr=args.learning_rate and a constant schedule from a get_scheduler
helper (a LambdaLR), and an Accelerate-like object whose save_state()/load_state() store and restore
the model, optimizer and scheduler state of checkpoint-<step> directories (kept in memory here). A
first session trains at learning_rate 1e-3 and saves checkpoint-40. The user then relaunches with
--resume_from_checkpoint latest and a lower --learning_rate 1e-4: the optimizer and scheduler are
built with the new value, but load_state() brings back the checkpoint's optimizer param_groups and
the scheduler's base_lrs, so the resumed session keeps training at the old 1e-3 while the user
believes the new learning rate is in use.

Thread: https://github.com/bghira/SimpleTuner/issues/163
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

CHECKPOINT_STORE = {}


class MiniAccelerator:
    def __init__(self):
        self._models, self._optimizers, self._schedulers = [], [], []

    def prepare(self, model, optimizer, scheduler):
        self._models.append(model)
        self._optimizers.append(optimizer)
        self._schedulers.append(scheduler)
        return model, optimizer, scheduler

    def save_state(self, output_dir):
        CHECKPOINT_STORE[output_dir] = {
            "models": [{k: v.clone() for k, v in m.state_dict().items()} for m in self._models],
            "optimizers": [o.state_dict() for o in self._optimizers],
            "schedulers": [s.state_dict() for s in self._schedulers],
        }

    def load_state(self, input_dir):
        state = CHECKPOINT_STORE[input_dir]
        for m, sd in zip(self._models, state["models"]):
            m.load_state_dict(sd)
        for o, sd in zip(self._optimizers, state["optimizers"]):
            o.load_state_dict(sd)
        for s, sd in zip(self._schedulers, state["schedulers"]):
            s.load_state_dict(sd)


def get_scheduler(name, optimizer, num_warmup_steps=0, num_training_steps=None):
    if name == "constant":
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    raise ValueError(name)


class Denoiser(nn.Module):
    def __init__(self, ch=4, hidden=64, cond_dim=16):
        super().__init__()
        self.inp = nn.Conv2d(ch, hidden, 3, padding=1)
        self.cond = nn.Linear(cond_dim + hidden, hidden)
        self.mid = nn.Sequential(nn.GroupNorm(8, hidden), nn.SiLU(), nn.Conv2d(hidden, hidden, 3, padding=1))
        self.out = nn.Conv2d(hidden, ch, 3, padding=1)
        self.hidden = hidden

    def forward(self, x, t, text_embeds):
        half = self.hidden // 2
        f = t.float()[:, None] * torch.exp(-math.log(10000) * torch.arange(half) / half)[None]
        c = self.cond(torch.cat([f.sin(), f.cos(), text_embeds], 1))
        h = self.inp(x) + c[:, :, None, None]
        return self.out(h + self.mid(h))


def latent_batches(n, bsz=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(4, 4, 8, 8, generator=g)
    captions = torch.randn(4, 16, generator=g)
    out = []
    for _ in range(n):
        k = torch.randint(0, 4, (bsz,), generator=g)
        out.append({"latents": protos[k] + 0.1 * torch.randn(bsz, 4, 8, 8, generator=g), "text_embeds": captions[k]})
    return out


def main(args):
    torch.manual_seed(args["seed"])
    accelerator = MiniAccelerator()
    unet = Denoiser()
    optimizer = torch.optim.AdamW(unet.parameters(), lr=args["learning_rate"], betas=(0.9, 0.999),
                                  weight_decay=1e-2, eps=1e-8)
    lr_scheduler = get_scheduler(args["lr_scheduler"], optimizer, num_warmup_steps=0,
                                 num_training_steps=args["max_train_steps"])
    unet, optimizer, lr_scheduler = accelerator.prepare(unet, optimizer, lr_scheduler)

    betas = torch.linspace(0.00085 ** 0.5, 0.012 ** 0.5, 1000) ** 2
    alphas_cumprod = torch.cumprod(1 - betas, 0)

    global_step = 0
    if args["resume_from_checkpoint"]:
        path = args["resume_from_checkpoint"]
        if path == "latest":
            dirs = sorted((d for d in CHECKPOINT_STORE if d.startswith("checkpoint")), key=lambda d: int(d.split("-")[1]))
            path = dirs[-1] if dirs else None
        if path is not None:
            print(f"Resuming from checkpoint {path}")
            accelerator.load_state(path)
            global_step = int(path.split("-")[1])

    train_dataloader = latent_batches(args["max_train_steps"] - global_step, seed=args["seed"] + global_step)
    unet.train()
    for batch in train_dataloader:
        latents = batch["latents"]
        noise = torch.randn_like(latents)
        timesteps = torch.randint(0, 1000, (latents.shape[0],))
        a = alphas_cumprod[timesteps].view(-1, 1, 1, 1)
        noisy_latents = a.sqrt() * latents + (1 - a).sqrt() * noise
        model_pred = unet(noisy_latents, timesteps, batch["text_embeds"])
        loss = F.mse_loss(model_pred.float(), noise.float(), reduction="mean")
        loss.backward()
        torch.nn.utils.clip_grad_norm_(unet.parameters(), args["max_grad_norm"])
        optimizer.step()
        lr_scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        global_step += 1
        if global_step % 10 == 0:
            print(f"step {global_step} loss {loss.item():.4f} lr {lr_scheduler.get_last_lr()[0]:.2e}")
        if global_step % args["checkpointing_steps"] == 0:
            accelerator.save_state(f"checkpoint-{global_step}")


if __name__ == "__main__":
    base = {"seed": 0, "lr_scheduler": "constant", "max_grad_norm": 1.0, "checkpointing_steps": 40}
    # first session
    main(dict(base, learning_rate=1e-3, max_train_steps=40, resume_from_checkpoint=None))
    # relaunch with a lower learning rate, resuming from the latest checkpoint
    main(dict(base, learning_rate=1e-4, max_train_steps=120, resume_from_checkpoint="latest"))
