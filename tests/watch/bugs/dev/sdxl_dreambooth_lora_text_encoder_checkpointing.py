"""An SDXL-style DreamBooth LoRA script with --train_text_encoder and --gradient_checkpointing: a frozen
VAE encoder, two frozen CLIP-like text encoders (penultimate hidden states concatenated, the second one
also giving a pooled embedding) and a frozen conditional UNet; vae, text encoders and unet are set to
requires_grad_(False), LoRA layers are then added to the attention projections of the UNet and of both
text encoders, and one AdamW gets the chained UNet and text-encoder LoRA parameters. Latents are scaled
by the VAE scaling factor, noised by a DDPM schedule, and the UNet's noise prediction is regressed with
MSE. Gradient checkpointing is switched on for the UNet (non-reentrant, as the UNet does it) and for the
text encoders (whose layers go through the reentrant torch.utils.checkpoint). The training loop calls
text_encoder_one.train() / text_encoder_two.train() but never sets requires_grad on the frozen embedding
layer in front of the checkpointed blocks, so no input of a checkpointed block requires grad: the
blocks run under no_grad, torch warns "None of the inputs have requires_grad=True", and the text-encoder
LoRA weights get no gradient and stay at their zero init while the run looks normal.

Thread: https://github.com/huggingface/diffusers/issues/5016
"""
import itertools
import math

import torch
import torch.nn.functional as F
import torch.utils.checkpoint
from torch import nn


class LoRALinear(nn.Module):
    def __init__(self, base, rank=4):
        super().__init__()
        self.base = base
        self.down = nn.Linear(base.in_features, rank, bias=False)
        self.up = nn.Linear(rank, base.out_features, bias=False)
        nn.init.normal_(self.down.weight, std=1.0 / rank)
        nn.init.zeros_(self.up.weight)

    def forward(self, x):
        return self.base(x) + self.up(self.down(x))


def add_lora(module, names, rank=4):
    params = []
    for name in names:
        layer = LoRALinear(getattr(module, name), rank)
        setattr(module, name, layer)
        params += [layer.down.weight, layer.up.weight]
    return params


class Attention(nn.Module):
    def __init__(self, dim, ctx_dim=None, heads=4):
        super().__init__()
        ctx_dim = ctx_dim or dim
        self.heads = heads
        self.q_proj, self.k_proj = nn.Linear(dim, dim), nn.Linear(ctx_dim, dim)
        self.v_proj, self.out_proj = nn.Linear(ctx_dim, dim), nn.Linear(dim, dim)

    def forward(self, x, ctx=None, causal=False):
        ctx = x if ctx is None else ctx
        b, n, d = x.shape
        q = self.q_proj(x).view(b, n, self.heads, -1).transpose(1, 2)
        k = self.k_proj(ctx).view(b, ctx.shape[1], self.heads, -1).transpose(1, 2)
        v = self.v_proj(ctx).view(b, ctx.shape[1], self.heads, -1).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return self.out_proj(out.transpose(1, 2).reshape(b, n, d))


class TextLayer(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.self_attn = Attention(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, h):
        h = h + self.self_attn(self.ln1(h), causal=True)
        return h + self.mlp(self.ln2(h))


class TextEncoder(nn.Module):
    def __init__(self, vocab=500, dim=32, layers=3, seq=8):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, dim)
        self.position_embedding = nn.Embedding(seq, dim)
        self.layers = nn.ModuleList(TextLayer(dim) for _ in range(layers))
        self.final_layer_norm = nn.LayerNorm(dim)
        self.gradient_checkpointing = False

    def gradient_checkpointing_enable(self):
        self.gradient_checkpointing = True

    def forward(self, input_ids):
        h = self.token_embedding(input_ids) + self.position_embedding.weight[: input_ids.shape[1]]
        hidden_states = [h]
        for layer in self.layers:
            if self.gradient_checkpointing and self.training:
                h = torch.utils.checkpoint.checkpoint(layer, h, use_reentrant=True)
            else:
                h = layer(h)
            hidden_states.append(h)
        last = self.final_layer_norm(h)
        return last, hidden_states, last[:, -1]


class CrossAttnBlock(nn.Module):
    def __init__(self, ch, ctx_dim):
        super().__init__()
        self.norm = nn.GroupNorm(4, ch)
        self.attn = Attention(ch, ctx_dim)
        self.conv = nn.Conv2d(ch, ch, 3, padding=1)

    def forward(self, h, temb, ctx):
        b, c, hh, ww = h.shape
        h = h + self.conv(F.silu(self.norm(h))) + temb[:, :, None, None]
        seq = self.norm(h).flatten(2).transpose(1, 2)
        return h + self.attn(seq, ctx).transpose(1, 2).reshape(b, c, hh, ww)


class UNet(nn.Module):
    def __init__(self, in_ch=4, ch=32, ctx_dim=64, pooled_dim=32):
        super().__init__()
        self.conv_in = nn.Conv2d(in_ch, ch, 3, padding=1)
        self.time_embedding = nn.Sequential(nn.Linear(ch + pooled_dim, ch), nn.SiLU(), nn.Linear(ch, ch))
        self.blocks = nn.ModuleList(CrossAttnBlock(ch, ctx_dim) for _ in range(2))
        self.conv_out = nn.Conv2d(ch, in_ch, 3, padding=1)
        self.ch, self.gradient_checkpointing = ch, False

    def enable_gradient_checkpointing(self):
        self.gradient_checkpointing = True

    def forward(self, sample, timesteps, encoder_hidden_states, text_embeds):
        half = self.ch // 2
        freqs = torch.exp(-math.log(10000) * torch.arange(half) / half)
        t = timesteps.float()[:, None] * freqs[None]
        temb = self.time_embedding(torch.cat([t.sin(), t.cos(), text_embeds], 1))
        h = self.conv_in(sample)
        for block in self.blocks:
            if self.gradient_checkpointing and self.training:
                h = torch.utils.checkpoint.checkpoint(block, h, temb, encoder_hidden_states, use_reentrant=False)
            else:
                h = block(h, temb, encoder_hidden_states)
        return self.conv_out(F.silu(h))


class DDPMScheduler:
    def __init__(self, num_train_timesteps=1000):
        betas = torch.linspace(0.00085 ** 0.5, 0.012 ** 0.5, num_train_timesteps) ** 2
        self.alphas_cumprod = torch.cumprod(1 - betas, 0)
        self.num_train_timesteps = num_train_timesteps

    def add_noise(self, x0, noise, t):
        a = self.alphas_cumprod[t].view(-1, 1, 1, 1)
        return a.sqrt() * x0 + (1 - a).sqrt() * noise


def instance_batches(n, bsz=2, res=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, res), torch.linspace(-1, 1, res), indexing="ij")
    subject = torch.stack([torch.sin(3 * xx), torch.cos(2 * yy), xx * yy])
    prompt_ids = torch.tensor([[1, 7, 9, 42, 311, 2, 0, 0]])  # "a photo of sks dog"
    out = []
    for _ in range(n):
        shift = torch.randint(-2, 3, (bsz, 2), generator=g)
        imgs = torch.stack([torch.roll(subject, (int(s[0]), int(s[1])), (1, 2)) for s in shift])
        imgs = (imgs + 0.05 * torch.randn(imgs.shape, generator=g)).clamp(-1, 1)
        out.append({"pixel_values": imgs, "input_ids": prompt_ids.repeat(bsz, 1)})
    return out


def encode_prompt(text_encoders, input_ids):
    embeds, pooled = [], None
    for text_encoder in text_encoders:
        _, hidden_states, pooled = text_encoder(input_ids)
        embeds.append(hidden_states[-2])
    return torch.cat(embeds, dim=-1), pooled


def main(args):
    torch.manual_seed(args["seed"])
    vae_encoder = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.SiLU(), nn.Conv2d(8, 4, 3, 1, 1))
    vae_scaling_factor = 0.13025
    text_encoder_one, text_encoder_two = TextEncoder(), TextEncoder()
    unet = UNet()
    noise_scheduler = DDPMScheduler()

    vae_encoder.requires_grad_(False)
    text_encoder_one.requires_grad_(False)
    text_encoder_two.requires_grad_(False)
    unet.requires_grad_(False)

    if args["gradient_checkpointing"]:
        unet.enable_gradient_checkpointing()
        if args["train_text_encoder"]:
            text_encoder_one.gradient_checkpointing_enable()
            text_encoder_two.gradient_checkpointing_enable()

    unet_lora_parameters = []
    for block in unet.blocks:
        unet_lora_parameters += add_lora(block.attn, ["q_proj", "k_proj", "v_proj", "out_proj"], args["rank"])
    text_lora_parameters_one, text_lora_parameters_two = [], []
    if args["train_text_encoder"]:
        for layer in text_encoder_one.layers:
            text_lora_parameters_one += add_lora(layer.self_attn, ["q_proj", "k_proj", "v_proj", "out_proj"], args["rank"])
        for layer in text_encoder_two.layers:
            text_lora_parameters_two += add_lora(layer.self_attn, ["q_proj", "k_proj", "v_proj", "out_proj"], args["rank"])

    params_to_optimize = [
        {"params": unet_lora_parameters, "lr": args["learning_rate"]},
        {"params": text_lora_parameters_one + text_lora_parameters_two, "lr": args["text_encoder_lr"]},
    ]
    optimizer = torch.optim.AdamW(params_to_optimize, betas=(0.9, 0.999), weight_decay=1e-4, eps=1e-8)
    lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)

    train_dataloader = instance_batches(args["steps_per_epoch"])
    global_step = 0
    for epoch in range(args["num_train_epochs"]):
        unet.train()
        if args["train_text_encoder"]:
            text_encoder_one.train()
            text_encoder_two.train()
        for step, batch in enumerate(train_dataloader):
            with torch.no_grad():
                model_input = vae_encoder(batch["pixel_values"]) * vae_scaling_factor
            noise = torch.randn_like(model_input)
            bsz = model_input.shape[0]
            timesteps = torch.randint(0, noise_scheduler.num_train_timesteps, (bsz,)).long()
            noisy_model_input = noise_scheduler.add_noise(model_input, noise, timesteps)

            prompt_embeds, pooled_prompt_embeds = encode_prompt([text_encoder_one, text_encoder_two], batch["input_ids"])
            model_pred = unet(noisy_model_input, timesteps, prompt_embeds, pooled_prompt_embeds)
            loss = F.mse_loss(model_pred.float(), noise.float(), reduction="mean")

            loss.backward()
            params_to_clip = itertools.chain(unet_lora_parameters, text_lora_parameters_one, text_lora_parameters_two)
            torch.nn.utils.clip_grad_norm_(params_to_clip, args["max_grad_norm"])
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()
            global_step += 1
            if global_step % 10 == 0:
                te_up = max(p.abs().max().item() for p in text_lora_parameters_one[1::2] + text_lora_parameters_two[1::2])
                print(f"epoch {epoch} step {global_step} loss {loss.item():.4f} text-encoder lora up max {te_up:.2e}")


if __name__ == "__main__":
    main({"seed": 0, "rank": 4, "learning_rate": 1e-3, "text_encoder_lr": 5e-4, "max_grad_norm": 1.0,
          "train_text_encoder": True, "gradient_checkpointing": True, "num_train_epochs": 4, "steps_per_epoch": 20})
