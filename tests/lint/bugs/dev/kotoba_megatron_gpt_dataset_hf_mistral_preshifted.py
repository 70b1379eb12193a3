"""
Shape: continual-pretraining recipe mixing a Megatron-style GPTDataset (mmap indexed tokens, __getitem__ returning a dict with ltor masks) and a Hugging Face MistralForCausalLM/LlamaForCausalLM wrapped in FSDP; train(model, train_dataloader, eval_dataloader, optimizer, lr_scheduler, grad_accum, local_rank, rank) reads args from a global get_args(), cycles the loaders, rewrites batch keys, calls model(**batch).loss under autocast, scales with ShardedGradScaler for fp16, and steps optimizer and scheduler per iteration.
Bug: the dataset cuts each sample into tokens = text[:-1] and labels = text[1:] in Megatron's convention, but the batch goes to a Transformers causal LM as labels=, which shifts them again, so the model is trained on the token two positions ahead.
Thread: https://github.com/kotoba-tech/kotoba-recipes/pull/1
"""
import os
from contextlib import nullcontext

import torch
import torch.distributed as dist
from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.nn.utils import clip_grad_norm_
from transformers import MistralForCausalLM

from megatron_lm.megatron.core.datasets.megatron_dataset import MegatronDataset
from megatron_lm.megatron.global_vars import get_args


def ltor_masks(tokens, eod_id, reset_pos, reset_attn, eod_mask_loss):
    n = tokens.numel()
    attention_mask = torch.tril(torch.ones((n, n))).unsqueeze(0) < 0.5
    loss_mask = torch.ones(n, dtype=torch.float)
    if eod_mask_loss:
        loss_mask[tokens == eod_id] = 0.0
    position_ids = torch.arange(n, dtype=torch.long)
    return attention_mask, loss_mask, position_ids


class PackedGPTDataset(MegatronDataset):
    def __len__(self):
        return self.sample_index.shape[0] - 1

    def __getitem__(self, idx):
        text, _ = self._query_document_sample_shuffle_indices(idx)
        ids = torch.from_numpy(text).long()
        labels = ids[1:].contiguous()
        tokens = ids[:-1].contiguous()
        attention_mask, loss_mask, position_ids = ltor_masks(
            tokens, self.config.eod_id, self.config.reset_position_ids,
            self.config.reset_attention_mask, self.config.eod_mask_loss)
        return {"input_ids": tokens, "labels": labels, "attention_mask": attention_mask,
                "loss_mask": loss_mask, "position_ids": position_ids}


def cycle(loader):
    while True:
        for b in loader:
            yield b


def train(model, train_dataloader, eval_dataloader, optimizer, lr_scheduler,
          gradient_accumulation_steps, local_rank=None, rank=None):
    args = get_args()
    scaler = ShardedGradScaler() if args.fp16 else None
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = local_rank if local_rank is not None else 0
    autocast = torch.cuda.amp.autocast if args.fp16 else nullcontext

    iteration = args.iteration
    train_it = iter(cycle(train_dataloader))

    while iteration < args.train_iters:
        model.train()
        total = 0.0
        for _ in range(gradient_accumulation_steps):
            batch = next(train_it)
            batch.pop("dataset_id", None)
            batch.pop("attention_mask")
            batch["attention_mask"] = batch.pop("loss_mask")
            batch = {k: v.to(local_rank) for k, v in batch.items()}
            with autocast():
                loss = model(**batch).loss
            loss = loss / gradient_accumulation_steps
            if args.fp16:
                scaler.scale(loss).backward()
            else:
                loss.backward()
            total += loss.item()
            if args.grad_clip_norm > 0:
                clip_grad_norm_(model.parameters(), args.grad_clip_norm)
        iteration += 1
        if args.fp16:
            scaler.step(optimizer)
            scaler.update()
        elif args.bf16:
            optimizer.step()
        optimizer.zero_grad()
        lr_scheduler.step()

        avg = torch.tensor(total).to(local_rank)
        dist.all_reduce(avg, op=dist.ReduceOp.SUM)
        if rank == 0 and iteration % args.log_interval == 0:
            print(f"iter {iteration} loss {avg.item() / world_size:.4f}")


def main(build_datasets, build_loader, wrap_policy, mp_policy):
    args = get_args()
    model = MistralForCausalLM.from_pretrained(args.base_model, use_cache=False)
    if args.bf16:
        model.to(torch.bfloat16)
    model = FSDP(model, auto_wrap_policy=wrap_policy, mixed_precision=mp_policy,
                 device_id=torch.cuda.current_device(), limit_all_gathers=True)
    train_ds, valid_ds, _ = build_datasets()
    train_dl = build_loader(train_ds, consumed_samples=args.global_batch_size * args.iteration)
    valid_dl = build_loader(valid_ds, consumed_samples=0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(args.adam_beta1, args.adam_beta2),
                                  eps=args.adam_eps, weight_decay=args.weight_decay)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.85)
    train(model, train_dl, valid_dl, optimizer, scheduler, args.gradient_accumulation_steps,
          local_rank=int(os.environ.get("LOCAL_RANK", 0)), rank=dist.get_rank())
