"""
Shape: notebook train(train_dataset, model, tokenizer) with a cfg dict; AdamW + WarmupLinearSchedule from pytorch_transformers; optional apex amp; steps inside a gradient-accumulation branch.
Bug: scheduler.step() is called before optimizer.step() in the accumulation branch.
Thread: https://github.com/ThilinaRajapakse/pytorch-transformers-classification/issues/21
"""
import math

import torch
from torch.utils.data import DataLoader, RandomSampler
from tqdm import tqdm_notebook, trange
from pytorch_transformers import AdamW, WarmupLinearSchedule

cfg = {
    'train_batch_size': 8,
    'gradient_accumulation_steps': 1,
    'num_train_epochs': 1,
    'weight_decay': 0,
    'learning_rate': 4e-5,
    'adam_epsilon': 1e-8,
    'warmup_ratio': 0.06,
    'warmup_steps': 0,
    'max_grad_norm': 1.0,
    'fp16': True,
    'fp16_opt_level': 'O1',
    'model_type': 'xlnet',
}
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def train(train_dataset, model, tokenizer):
    rand_sampler = RandomSampler(train_dataset)
    train_dl = DataLoader(train_dataset, sampler=rand_sampler, batch_size=cfg['train_batch_size'])
    n_updates = len(train_dl) // cfg['gradient_accumulation_steps'] * cfg['num_train_epochs']

    no_wd = ['bias', 'LayerNorm.weight']
    pgroups = [
        {'params': [p for n, p in model.named_parameters() if not any(s in n for s in no_wd)],
         'weight_decay': cfg['weight_decay']},
        {'params': [p for n, p in model.named_parameters() if any(s in n for s in no_wd)],
         'weight_decay': 0.0},
    ]
    n_warm = math.ceil(n_updates * cfg['warmup_ratio'])
    cfg['warmup_steps'] = n_warm if cfg['warmup_steps'] == 0 else cfg['warmup_steps']

    optimizer = AdamW(pgroups, lr=cfg['learning_rate'], eps=cfg['adam_epsilon'])
    scheduler = WarmupLinearSchedule(optimizer, warmup_steps=cfg['warmup_steps'], t_total=n_updates)

    if cfg['fp16']:
        from apex import amp
        model, optimizer = amp.initialize(model, optimizer, opt_level=cfg['fp16_opt_level'])

    updates = 0
    loss_acc = 0.0
    model.zero_grad()
    for _ in trange(int(cfg['num_train_epochs']), desc="Epoch"):
        for step, batch in enumerate(tqdm_notebook(train_dl, desc="Iteration")):
            model.train()
            batch = tuple(t.to(device) for t in batch)
            model_inputs = {'input_ids': batch[0],
                    'attention_mask': batch[1],
                    'token_type_ids': batch[2] if cfg['model_type'] in ['bert', 'xlnet'] else None,
                    'labels': batch[3]}
            out = model(**model_inputs)
            loss = out[0]

            if cfg['gradient_accumulation_steps'] > 1:
                loss = loss / cfg['gradient_accumulation_steps']

            if cfg['fp16']:
                with amp.scale_loss(loss, optimizer) as scaled_loss:
                    scaled_loss.backward()
                torch.nn.utils.clip_grad_norm_(amp.master_params(optimizer), cfg['max_grad_norm'])
            else:
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg['max_grad_norm'])

            loss_acc += loss.item()
            if (step + 1) % cfg['gradient_accumulation_steps'] == 0:
                scheduler.step()
                optimizer.step()
                model.zero_grad()
                updates += 1

    return updates, loss_acc / updates
