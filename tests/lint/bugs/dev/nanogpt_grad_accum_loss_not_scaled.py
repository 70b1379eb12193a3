"""
Shape: flat module-level training script with globals as config; memmap sample_batch(split) loader, GPT model with model.configure_optimizers(...), GradScaler, optional torch.compile/DDP, manual cosine LR via lr_at(it), while-True loop with an inner micro loop for gradient accumulation.
Bug: inside the micro loop each micro-batch loss is backpropagated as grad_scaler.scale(loss).backward() without dividing by accum_steps before the single optimizer step, so gradients are the sum over micro-batches.
Thread: https://github.com/karpathy/nanoGPT/issues/168
"""
import math
import os
import time
import contextlib

import numpy as np
import torch
from torch.nn import parallel as tnp

from model import GPT, GPTConfig

out_dir = "out"
eval_every = 2000
eval_batches = 200
dataset = "openwebtext"
accum_steps = 5
micro_bsz = 12
ctx_len = 1024
peak_lr = 6e-4
stop_after = 600000
weight_decay = 1e-1
beta1, beta2 = 0.9, 0.95
clip_norm = 1.0
use_decay = True
warmup = 2000
decay_until = 600000
floor_lr = 6e-5
device = "cuda"
dtype = "bfloat16"
compile = True
ddp = int(os.environ.get("RANK", -1)) != -1
local_rank = int(os.environ.get("LOCAL_RANK", 0))

dev_kind = "cuda" if "cuda" in device else "cpu"
amp_dtype = dict(float32=torch.float32, bfloat16=torch.bfloat16, float16=torch.float16)[dtype]
if dev_kind == "cpu":
    amp_ctx = contextlib.nullcontext()
else:
    amp_ctx = torch.amp.autocast(device_type=dev_kind, dtype=amp_dtype)

bin_dir = os.path.join("data", dataset, "")
train_tokens = np.memmap(bin_dir + "train.bin", mode="r", dtype=np.uint16)
val_tokens = np.memmap(bin_dir + "val.bin", mode="r", dtype=np.uint16)


def sample_batch(split):
    src = val_tokens if split != "train" else train_tokens
    starts = torch.randint(len(src) - ctx_len, (micro_bsz,))
    x = torch.stack([torch.from_numpy(src[i:i + ctx_len].astype(np.int64)) for i in starts])
    y = torch.stack([torch.from_numpy(src[i + 1:i + 1 + ctx_len].astype(np.int64)) for i in starts])
    return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)


model = GPT(GPTConfig(n_layer=12, n_head=12, n_embd=768, block_size=ctx_len, bias=False, vocab_size=50304))
model.to(device)
grad_scaler = torch.cuda.amp.GradScaler(enabled=dtype == "float16")
opt = model.configure_optimizers(weight_decay, peak_lr, (beta1, beta2), dev_kind)
if compile:
    model = torch.compile(model)
if ddp:
    model = tnp.DistributedDataParallel(model, device_ids=[local_rank])


@torch.no_grad()
def eval_losses():
    out = {}
    model.eval()
    for split in ["train", "val"]:
        vals = torch.zeros(eval_batches)
        for k in range(eval_batches):
            X, Y = sample_batch(split)
            with amp_ctx:
                _, l = model(X, Y)
            vals[k] = l.item()
        out[split] = vals.mean()
    model.train()
    return out


def lr_at(it):
    if it < warmup:
        return peak_lr * (it / warmup)
    if it > decay_until:
        return floor_lr
    ratio = (it - warmup) / (decay_until - warmup)
    return floor_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (peak_lr - floor_lr)


it_num = 0
X, Y = sample_batch("train")
t0 = time.time()
while True:
    lr = peak_lr if not use_decay else lr_at(it_num)
    for group in opt.param_groups:
        group["lr"] = lr

    if it_num % eval_every == 0:
        losses = eval_losses()

    for micro in range(accum_steps):
        if ddp:
            model.require_backward_grad_sync = micro == accum_steps - 1
        with amp_ctx:
            logits, loss = model(X, Y)
        X, Y = sample_batch("train")
        grad_scaler.scale(loss).backward()
    if clip_norm != 0.0:
        grad_scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=clip_norm)
    grad_scaler.step(opt)
    grad_scaler.update()
    opt.zero_grad(True)

    it_num += 1
    if it_num > stop_after:
        break
