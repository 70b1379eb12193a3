"""
Shape: a single training script with module-level globals; `run_epoch(epoch, tracker)` walks the
global `sft_loader`, sets the cosine lr by hand each step, and steps AdamW through a GradScaler with
accumulation. The loader is built under `__main__` with a DistributedSampler only for DDP runs and
`shuffle=False` hard-coded.
Bug: on a single GPU the sampler is None and shuffle is False, so the SFT jsonl (concatenated from
different sources/templates) is read in file order every epoch, and the loss spikes whenever the
data block changes; shuffling the train loader removed the spikes.
Thread: https://github.com/jingyaogong/minimind/pull/503
"""
import argparse
import math
import os
from contextlib import nullcontext

import torch
import torch.distributed as dist
from torch import nn, optim
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

from model.model_minimind import MiniMindConfig, MiniMindForCausalLM
from dataset.lm_dataset import SFTDataset
from transformers import AutoTokenizer


def log_main(msg):
    if not use_ddp or dist.get_rank() == 0:
        print(msg)


def cosine_lr(step, total, base_lr):
    return base_lr / 10 + 0.5 * base_lr * (1 + math.cos(math.pi * step / total))


def run_epoch(epoch, tracker):
    token_ce = nn.CrossEntropyLoss(reduction="none")
    for step, (inp, tgt, mask) in enumerate(sft_loader):
        inp = inp.to(cli.device)
        tgt = tgt.to(cli.device)
        mask = mask.to(cli.device)
        cur_lr = cosine_lr(epoch * steps_per_epoch + step, cli.epochs * steps_per_epoch, cli.learning_rate)
        for group in opt.param_groups:
            group["lr"] = cur_lr

        with autocast_ctx:
            out = lm(inp)
            per_tok = token_ce(out.logits.view(-1, out.logits.size(-1)), tgt.view(-1)).view(tgt.size())
            loss = (per_tok * mask).sum() / mask.sum()
            loss = loss + out.aux_loss
            loss = loss / cli.accumulation_steps

        grad_scaler.scale(loss).backward()

        if (step + 1) % cli.accumulation_steps == 0:
            grad_scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(lm.parameters(), cli.grad_clip)
            grad_scaler.step(opt)
            grad_scaler.update()
            opt.zero_grad(set_to_none=True)

        if step % cli.log_interval == 0:
            log_main(f"epoch {epoch + 1} step {step}/{steps_per_epoch} loss {loss.item() * cli.accumulation_steps:.4f}")
            if tracker is not None:
                tracker.log({"loss": loss.item() * cli.accumulation_steps, "lr": cur_lr})


def build_model(cfg):
    tok = AutoTokenizer.from_pretrained("../model")
    net = MiniMindForCausalLM(cfg)
    weights = torch.load(f"{cli.save_dir}/pretrain_{cfg.hidden_size}.pth", map_location=cli.device)
    net.load_state_dict(weights, strict=False)
    return net.to(cli.device), tok


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--save_dir", type=str, default="../out")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch_size", type=int, default=16)
    ap.add_argument("--learning_rate", type=float, default=5e-7)
    ap.add_argument("--device", type=str, default="cuda:0")
    ap.add_argument("--num_workers", type=int, default=1)
    ap.add_argument("--accumulation_steps", type=int, default=1)
    ap.add_argument("--grad_clip", type=float, default=1.0)
    ap.add_argument("--log_interval", type=int, default=100)
    ap.add_argument("--max_seq_len", type=int, default=512)
    ap.add_argument("--data_path", type=str, default="../dataset/sft_mini_512.jsonl")
    cli = ap.parse_args()

    lm_cfg = MiniMindConfig(hidden_size=512, num_hidden_layers=8)
    autocast_ctx = torch.cuda.amp.autocast() if "cuda" in cli.device else nullcontext()
    use_ddp = int(os.environ.get("RANK", -1)) != -1
    if use_ddp:
        dist.init_process_group("nccl")
        local_rank = int(os.environ["LOCAL_RANK"])
        cli.device = f"cuda:{local_rank}"
        torch.cuda.set_device(cli.device)

    lm, tokenizer = build_model(lm_cfg)

    sft_set = SFTDataset(cli.data_path, tokenizer, max_length=cli.max_seq_len)
    dist_sampler = DistributedSampler(sft_set) if use_ddp else None
    sft_loader = DataLoader(sft_set, batch_size=cli.batch_size, pin_memory=True, drop_last=False,
                            shuffle=False, num_workers=cli.num_workers, sampler=dist_sampler)

    grad_scaler = torch.cuda.amp.GradScaler(enabled=True)
    opt = optim.AdamW(lm.parameters(), lr=cli.learning_rate)

    if use_ddp:
        lm = DistributedDataParallel(lm, device_ids=[local_rank])

    steps_per_epoch = len(sft_loader)
    for epoch in range(cli.epochs):
        dist_sampler and dist_sampler.set_epoch(epoch)
        run_epoch(epoch, None)
