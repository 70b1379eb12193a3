"""
Shape: package split into build_glide(use_fp16=...) (builds the GLIDE UNet + diffusion, loads the checkpoint, calls unet.convert_to_fp16() when use_fp16), a train-step helper returning an MSE on predicted noise, train_one_epoch(...) doing backward/step/model.zero_grad(), and finetune_glide(...) building th.optim.AdamW over requires_grad params.
Bug: with use_fp16 the model weights are converted to float16 and then trained with AdamW at the default eps=1e-8, which rounds to zero in fp16, so the first update produces NaNs.
Thread: https://github.com/afiaka87/glide-finetune/issues/5
"""
import torch as th
import glide_text2im.download as g_dl
from glide_text2im.model_creation import create_model_and_diffusion, model_and_diffusion_defaults
from tqdm import trange

from glide_finetune import loader as ft_loader


def build_glide(ckpt_path="", use_fp16=False, freeze_text=False):
    opts = dict(model_and_diffusion_defaults())
    opts["use_fp16"] = use_fp16
    unet, diffusion = create_model_and_diffusion(**opts)
    unet.requires_grad_()
    if freeze_text:
        for frozen in (unet.transformer, unet.token_embedding):
            frozen.requires_grad_(False)
    if len(ckpt_path) > 0:
        unet.load_state_dict(th.load(ckpt_path, map_location="cpu"))
    else:
        unet.load_state_dict(g_dl.load_checkpoint("base", "cpu"))
    if use_fp16:
        unet.convert_to_fp16()
    return (unet, diffusion, opts)


def diffusion_step(unet, diffusion, batch, device):
    tokens, masks, images = [part.to(device) for part in batch]
    t = th.randint(0, len(diffusion.betas) - 1, (images.shape[0],), device=device)
    eps_true = th.randn_like(images)
    noisy = diffusion.q_sample(images, t, noise=eps_true)
    _, C = noisy.shape[:2]
    out = unet(noisy, t, tokens=tokens, mask=masks)
    epsilon, _ = th.split(out, C, dim=1)
    return th.nn.functional.mse_loss(epsilon, eps_true.detach())


def train_one_epoch(unet, diffusion, loader, optimizer, device="cpu"):
    unet.to(device)
    unet.train()
    for batch in loader:
        mse_val = diffusion_step(unet=unet, diffusion=diffusion,
                                    batch=batch, device=device)
        mse_val.backward()
        optimizer.step()
        unet.zero_grad()


def finetune_glide(data_dir="./data", batch_size=1, lr=1e-5, wd=0.0,
                       ckpt_in="", use_fp16=False, device="cpu", freeze_text=False,
                       num_epochs=100):
    unet, diffusion, opts = build_glide(
        ckpt_path=ckpt_in, use_fp16=use_fp16, freeze_text=freeze_text)
    unet.train()

    dataset = ft_loader.TextImageDataset(folder=data_dir, side_x=64, side_y=64, tokenizer=unet.tokenizer,
                               text_ctx_len=opts["text_ctx"], shuffle=True)
    loader = th.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=0,
                                          pin_memory=(device == "cuda"))

    optimizer = th.optim.AdamW(
        [p for p in unet.parameters() if p.requires_grad],
        lr=lr,
        weight_decay=wd
    )

    for epoch in trange(num_epochs):
        train_one_epoch(unet=unet, diffusion=diffusion,
                                 loader=loader, optimizer=optimizer, device=device)
