"""
Shape: Llama fine-tuning recipe split in two files: main(**kwargs) builds the (optionally FSDP/PEFT) model, DistributedSampler-backed train/eval DataLoaders, AdamW (or AnyPrecisionAdamW under pure bf16) and StepLR(optimizer, step_size=1, gamma=train_config.gamma), then calls a train(model, train_dataloader, eval_dataloader, tokenizer, optimizer, lr_scheduler, gradient_accumulation_steps, train_config, fsdp_config, local_rank, rank) helper; that helper loops over epochs under a MemoryTrace context, moves each batch dict to the device, divides the loss by gradient_accumulation_steps, runs an fp16 GradScaler branch or a plain branch that steps on accumulation boundaries, then computes perplexity and runs an evaluation(...) helper with checkpoint saving.
Bug: the StepLR is meant to multiply the lr by gamma (0.85) once per epoch, but in the non-fp16 branch lr_scheduler.step() is called right after optimizer.step() on every accumulation boundary, so the lr shrinks by 0.85 per optimizer step and is essentially zero after a few dozen updates.
Thread: https://github.com/meta-llama/llama-cookbook/issues/27
"""
import torch
import torch.distributed as dist
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DistributedSampler
from tqdm import tqdm
from transformers import default_data_collator

from configs import fsdp_config, train_config
from utils.config_utils import update_config
from utils.dataset_utils import get_preprocessed_dataset
from utils.memory_utils import MemoryTrace
from utils.model_utils import load_model_and_tokenizer
from utils.train_utils import evaluation, save_checkpoint


def train(model, train_dataloader, eval_dataloader, tokenizer, optimizer, lr_scheduler,
          gradient_accumulation_steps, train_config, fsdp_config=None, local_rank=None, rank=None):
    scaler = torch.cuda.amp.GradScaler() if train_config.use_fp16 else None
    train_prep, train_loss = [], []
    best_val_loss = float("inf")
    for epoch in range(train_config.num_epochs):
        with MemoryTrace() as memtrace:
            model.train()
            total_loss = 0.0
            n_seen = 0
            for step, batch in enumerate(tqdm(train_dataloader, desc=f"Training Epoch{epoch}")):
                for key in batch.keys():
                    if train_config.enable_fsdp:
                        batch[key] = batch[key].to(local_rank)
                    elif not train_config.quantization:
                        batch[key] = batch[key].to('cuda')
                loss = model(**batch).loss
                loss = loss / gradient_accumulation_steps
                total_loss += loss.detach().float()
                n_seen += len(batch[next(iter(batch))])
                boundary = (step + 1) % gradient_accumulation_steps == 0 or step == len(train_dataloader) - 1
                if train_config.use_fp16:
                    scaler.scale(loss).backward()
                    if boundary:
                        scaler.step(optimizer)
                        scaler.update()
                        optimizer.zero_grad()
                else:
                    loss.backward()
                    if boundary:
                        optimizer.step()
                        lr_scheduler.step()
                        optimizer.zero_grad()

        if torch.cuda.device_count() > 1 and train_config.enable_fsdp:
            dist.all_reduce(total_loss, op=dist.ReduceOp.SUM)
        epoch_loss = total_loss / n_seen
        train_prep.append(torch.exp(epoch_loss))
        train_loss.append(epoch_loss)
        print(f"Max CUDA memory allocated was {memtrace.peak} GB")

        if train_config.run_validation:
            eval_ppl, eval_loss = evaluation(model, train_config, eval_dataloader, rank, tokenizer)
            if train_config.save_model and eval_loss < best_val_loss:
                save_checkpoint(model, optimizer, rank, train_config, fsdp_config)
                best_val_loss = eval_loss
        print(f"Epoch {epoch + 1}: train_perplexity={train_prep[-1]:.4f}, train_epoch_loss={epoch_loss:.4f}")
    return {"avg_train_prep": sum(train_prep) / len(train_prep),
            "avg_train_loss": sum(train_loss) / len(train_loss)}


def main(**kwargs):
    update_config((train_config, fsdp_config), **kwargs)
    model, tokenizer, local_rank, rank = load_model_and_tokenizer(train_config, fsdp_config)
    gradient_accumulation_steps = train_config.batch_size_training // train_config.micro_batch_size

    ds_train = get_preprocessed_dataset(tokenizer, train_config.dataset, split="train")
    ds_val = get_preprocessed_dataset(tokenizer, train_config.dataset, split="test")
    train_sampler = val_sampler = None
    if train_config.enable_fsdp:
        train_sampler = DistributedSampler(ds_train, rank=dist.get_rank(), num_replicas=dist.get_world_size(),
                                           shuffle=True)
        val_sampler = DistributedSampler(ds_val, rank=dist.get_rank(), num_replicas=dist.get_world_size())
    train_loader = torch.utils.data.DataLoader(ds_train, batch_size=train_config.batch_size_training,
                                               num_workers=train_config.num_workers_dataloader, pin_memory=True,
                                               sampler=train_sampler, drop_last=True,
                                               collate_fn=default_data_collator)
    eval_loader = torch.utils.data.DataLoader(ds_val, batch_size=train_config.val_batch_size,
                                              num_workers=train_config.num_workers_dataloader, pin_memory=True,
                                              sampler=val_sampler, drop_last=True,
                                              collate_fn=default_data_collator)

    optimizer = optim.AdamW(model.parameters(), lr=train_config.lr, weight_decay=0.0)
    scheduler = StepLR(optimizer, step_size=1, gamma=train_config.gamma)

    results = train(model, train_loader, eval_loader, tokenizer, optimizer, scheduler,
                    gradient_accumulation_steps, train_config,
                    fsdp_config if train_config.enable_fsdp else None,
                    local_rank if train_config.enable_fsdp else None,
                    rank if train_config.enable_fsdp else None)
    if not train_config.enable_fsdp or rank == 0:
        print(results)
