"""
Shape: SFT script main(args): Accelerator with a DeepSpeed Ulysses ParallelismConfig when sequence_parallel_size > 1, AutoModelForCausalLM in bf16 with optional LoRA, DataCollatorForSeq2Seq wrapped in a local collate_fn that pads the sequence to a multiple of the SP size, AdamW over decay/no-decay groups, a scheduler helper, accelerator.prepare(model, optimizer, loader, scheduler), then an epoch loop with accelerator.accumulate(model), model(**batch, use_cache=False) and a loss re-weighted across SP ranks.
Bug: under sequence parallelism the prepared dataloader yields shift_labels that are already shifted by one; the loop renames them to labels and calls model(**batch), and the causal LM shifts labels again, so each position is trained on the token two ahead.
Thread: https://github.com/allenai/open-instruct/pull/1549
"""
import math
import os

import torch
from accelerate import Accelerator
from accelerate.utils import DeepSpeedSequenceParallelConfig, ParallelismConfig
from peft import LoraConfig, TaskType, get_peft_model
from torch.utils.data import DataLoader
from transformers import AutoModelForCausalLM, DataCollatorForSeq2Seq, get_scheduler


def make_scheduler(args, optimizer, n_steps):
    return get_scheduler(args.lr_scheduler_type, optimizer=optimizer,
                         num_warmup_steps=int(n_steps * args.warmup_ratio), num_training_steps=n_steps)


def main(args, tokenizer, train_dataset):
    sp_cfg = None
    if args.sequence_parallel_size > 1:
        world = int(os.environ.get("WORLD_SIZE", 1))
        sp_cfg = ParallelismConfig(
            sp_backend="deepspeed", sp_size=args.sequence_parallel_size,
            dp_shard_size=world // args.sequence_parallel_size,
            sp_handler=DeepSpeedSequenceParallelConfig(sp_seq_length_is_variable=True,
                                                       sp_attn_implementation="flash_attention_2"),
        )
    accelerator = Accelerator(parallelism_config=sp_cfg, gradient_accumulation_steps=args.gradient_accumulation_steps)

    model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, dtype=torch.bfloat16,
                                                 attn_implementation="flash_attention_2")
    if args.use_lora:
        model = get_peft_model(model, LoraConfig(task_type=TaskType.CAUSAL_LM, r=args.lora_rank,
                                                 lora_alpha=args.lora_alpha, lora_dropout=args.lora_dropout))

    seq2seq = DataCollatorForSeq2Seq(tokenizer=tokenizer, model=model, padding="longest")
    sp = args.sequence_parallel_size

    def collate_fn(features):
        batch = seq2seq(features)
        batch.pop("index", None)
        rem = batch["input_ids"].shape[1] % sp
        if rem:
            for k in batch:
                fill = -100 if k == "labels" else 0
                batch[k] = torch.nn.functional.pad(batch[k], (0, sp - rem), value=fill)
        return batch

    loader = DataLoader(train_dataset, shuffle=True, collate_fn=collate_fn, batch_size=args.per_device_train_batch_size)

    no_decay = ["bias", "layer_norm.weight"]
    groups = [
        {"params": [p for n, p in model.named_parameters() if not any(s in n for s in no_decay)],
         "weight_decay": args.weight_decay},
        {"params": [p for n, p in model.named_parameters() if any(s in n for s in no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=args.learning_rate)
    steps_per_epoch = math.ceil(len(loader) / args.gradient_accumulation_steps)
    max_steps = args.num_train_epochs * steps_per_epoch
    lr_scheduler = make_scheduler(args, optimizer, max_steps)

    model, optimizer, loader, lr_scheduler = accelerator.prepare(model, optimizer, loader, lr_scheduler)

    for epoch in range(args.num_train_epochs):
        model.train()
        getattr(loader, "dl", loader).set_epoch(epoch)
        running = 0.0
        for batch in loader:
            batch = {k: v.to(accelerator.device) if hasattr(v, "to") else v for k, v in batch.items()}
            if "labels" not in batch and "shift_labels" in batch:
                batch["labels"] = batch["shift_labels"]
                del batch["shift_labels"]
            with accelerator.accumulate(model):
                out = model(**batch, use_cache=False)
                loss = out.loss
                if sp > 1:
                    grp = accelerator.torch_device_mesh["sp"].get_group()
                    per_rank = torch.distributed.nn.functional.all_gather(loss.unsqueeze(0), group=grp)
                    n_good = (batch["labels"] != -100).sum().float()
                    goods = torch.distributed.nn.functional.all_gather(n_good.unsqueeze(0), group=grp)
                    loss = sum(per_rank[r] * goods[r] for r in range(sp) if goods[r] > 0) / torch.clamp(sum(goods), min=1)
                running += loss.detach().float()
                accelerator.backward(loss)
                if accelerator.sync_gradients and args.clip_grad_norm > 0:
                    accelerator.clip_grad_norm_(model.parameters(), args.clip_grad_norm)
                optimizer.step()
                optimizer.zero_grad()
                lr_scheduler.step()
    accelerator.wait_for_everyone()
