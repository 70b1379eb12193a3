"""
Shape: example script train(a, train_dataset, model, tokenizer): RandomSampler/DistributedSampler DataLoader, AdamW over no-decay param groups + get_linear_schedule_with_warmup, optional apex amp / DataParallel / DDP wrapping, then core = model.module-or-model and resize_token_embeddings(len(tokenizer)) just before the epoch loop.
Bug: the token embedding matrix is resized (a new Embedding module replaces the old one) after AdamW was built from model.named_parameters(), so the optimizer updates the discarded embedding.
Thread: https://github.com/huggingface/transformers/pull/3532
"""
import os
from typing import List

import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, RandomSampler
from torch.utils.data.distributed import DistributedSampler
from tqdm import tqdm, trange
from transformers import AdamW, PreTrainedModel, PreTrainedTokenizer, get_linear_schedule_with_warmup


def mask_tokens(inputs, tokenizer, a):
    raise NotImplementedError


def train(a, train_dataset, model: PreTrainedModel, tokenizer: PreTrainedTokenizer):
    a.train_batch_size = a.per_gpu_train_batch_size * max(1, a.n_gpu)

    def pad_collate(seqs: List[torch.Tensor]):
        if tokenizer._pad_token is None:
            return pad_sequence(seqs, batch_first=True)
        return pad_sequence(seqs, batch_first=True, padding_value=tokenizer.pad_token_id)

    train_sampler = RandomSampler(train_dataset) if a.local_rank == -1 else DistributedSampler(train_dataset)
    train_dl = DataLoader(train_dataset, sampler=train_sampler, batch_size=a.train_batch_size, collate_fn=pad_collate)

    if a.max_steps > 0:
        n_updates = a.max_steps
        a.num_train_epochs = a.max_steps // (len(train_dl) // a.gradient_accumulation_steps) + 1
    else:
        n_updates = len(train_dl) // a.gradient_accumulation_steps * a.num_train_epochs

    no_wd = ["bias", "LayerNorm.weight"]
    param_groups = [
        {"params": [p for n, p in model.named_parameters() if not any(s in n for s in no_wd)],
         "weight_decay": a.weight_decay},
        {"params": [p for n, p in model.named_parameters() if any(s in n for s in no_wd)],
         "weight_decay": 0.0},
    ]
    optimizer = AdamW(param_groups, lr=a.learning_rate, eps=a.adam_epsilon)
    scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=a.warmup_steps,
                                                num_training_steps=n_updates)

    if a.model_name_or_path and os.path.isfile(os.path.join(a.model_name_or_path, "optimizer.pt")):
        optimizer.load_state_dict(torch.load(os.path.join(a.model_name_or_path, "optimizer.pt")))
        scheduler.load_state_dict(torch.load(os.path.join(a.model_name_or_path, "scheduler.pt")))

    if a.fp16:
        from apex import amp
        model, optimizer = amp.initialize(model, optimizer, opt_level=a.fp16_opt_level)
    if a.n_gpu > 1:
        model = torch.nn.DataParallel(model)
    if a.local_rank != -1:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[a.local_rank],
                                                          output_device=a.local_rank,
                                                          find_unused_parameters=True)

    updates = 0
    loss_sum = 0.0

    core = model.module if hasattr(model, "module") else model
    core.resize_token_embeddings(len(tokenizer))

    model.zero_grad()
    for _ in trange(0, int(a.num_train_epochs), desc="Epoch"):
        for step, batch in enumerate(tqdm(train_dl, desc="Iteration")):
            inputs, labels = mask_tokens(batch, tokenizer, a) if a.mlm else (batch, batch)
            inputs = inputs.to(a.device)
            labels = labels.to(a.device)
            model.train()
            outputs = model(inputs, masked_lm_labels=labels) if a.mlm else model(inputs, labels=labels)
            loss = outputs[0]
            if a.n_gpu > 1:
                loss = loss.mean()
            if a.gradient_accumulation_steps > 1:
                loss = loss / a.gradient_accumulation_steps
            if a.fp16:
                with amp.scale_loss(loss, optimizer) as scaled_loss:
                    scaled_loss.backward()
            else:
                loss.backward()
            loss_sum += loss.item()
            if (step + 1) % a.gradient_accumulation_steps == 0:
                if a.fp16:
                    torch.nn.utils.clip_grad_norm_(amp.master_params(optimizer), a.max_grad_norm)
                else:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), a.max_grad_norm)
                optimizer.step()
                scheduler.step()
                model.zero_grad()
                updates += 1
            if a.max_steps > 0 and updates > a.max_steps:
                break
    return updates, loss_sum / updates
