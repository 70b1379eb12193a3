"""
Shape: a flat adapter-transformers training script without the Trainer class: argument parsing, set_seed, T5Tokenizer and T5ForConditionalGeneration.from_pretrained, a project getDataset() helper and DataLoaders with default_data_collator, a weight-decay / no-decay grouping of model.named_parameters() into AdamW, a transformers get_scheduler linear schedule sized from the loader, then the Houlsby adapter is added and activated for training, followed by a manual epoch loop over the loader with an eval pass.
Bug: the AdamW parameter groups are collected before model.add_adapter(...) and model.train_adapter(...), so the adapter weights created afterwards are not in the optimizer; their gradients are computed but they never change and the loss stays high.
Thread: https://github.com/adapter-hub/adapters/issues/260
"""
import argparse
import math

import torch
from torch.utils.data import DataLoader
from tqdm import tqdm
from transformers import (
    AdamW,
    HoulsbyConfig,
    T5ForConditionalGeneration,
    T5Tokenizer,
    default_data_collator,
    get_scheduler,
    set_seed,
)

from adapterT5_Dataset import getDataset


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--model_name", default="t5-base")
    p.add_argument("--task_name", default="summ")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--weight_decay", type=float, default=0.0)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch_size", type=int, default=8)
    p.add_argument("--warmup_steps", type=int, default=0)
    p.add_argument("--seed", type=int, default=42)
    return p.parse_args()


def evaluate(model, loader, device):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for batch in loader:
            batch = {k: v.to(device) for k, v in batch.items()}
            total += model(**batch).loss.item()
    model.train()
    return total / max(len(loader), 1)


def main():
    args = parse_args()
    set_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    tok = T5Tokenizer.from_pretrained(args.model_name)
    model = T5ForConditionalGeneration.from_pretrained(args.model_name)
    train_set, dev_set = getDataset(tok, "train"), getDataset(tok, "dev")
    train_loader = DataLoader(train_set, shuffle=True, batch_size=args.batch_size,
                              collate_fn=default_data_collator)
    dev_loader = DataLoader(dev_set, batch_size=args.batch_size, collate_fn=default_data_collator)

    skip_decay = ["bias", "LayerNorm.weight"]
    groups = [
        {"params": [p for n, p in model.named_parameters() if not any(s in n for s in skip_decay)],
         "weight_decay": args.weight_decay},
        {"params": [p for n, p in model.named_parameters() if any(s in n for s in skip_decay)],
         "weight_decay": 0.0},
    ]
    opt = AdamW(groups, lr=args.lr)
    steps_per_epoch = math.ceil(len(train_loader))
    sched = get_scheduler("linear", optimizer=opt, num_warmup_steps=args.warmup_steps,
                          num_training_steps=args.epochs * steps_per_epoch)

    adapter_cfg = HoulsbyConfig()
    model.add_adapter(args.task_name, config=adapter_cfg)
    model.train_adapter(args.task_name)
    model.set_active_adapters(args.task_name)
    model.to(device)

    model.train()
    for epoch in range(args.epochs):
        for batch in tqdm(train_loader, desc="epoch {}".format(epoch)):
            batch = {k: v.to(device) for k, v in batch.items()}
            out = model(**batch)
            out.loss.backward()
            opt.step()
            sched.step()
            opt.zero_grad()
        print("dev loss", evaluate(model, dev_loader, device))
    model.save_adapter("./adapter_out", args.task_name)


if __name__ == "__main__":
    main()
