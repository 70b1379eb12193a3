"""
Shape: One long main() for multi-task vision-and-language fine-tuning: it loads a VILBertForVLTasks with from_pretrained, builds one AdamW parameter group per named parameter (separate lr for the "vil_" layers, no decay for bias/LayerNorm), picks a pytorch_transformers warmup schedule (WarmupLinearSchedule or WarmupConstantSchedule) plus an optional torch CosineAnnealingLR, then loops epochs -> iterations -> task ids; each task's loss comes from the ForwardModelsTrain helper, is divided by gradient_accumulation_steps and backpropagated, and on an accumulation boundary the warmup scheduler, the optimizer and model.zero_grad() are called; the cosine scheduler ticks after the task loop.
Bug: On every accumulation boundary the warmup scheduler's step() is called before optimizer.step(), so each update already uses the next learning rate of the warmup schedule and its first value is never applied.
Thread: https://github.com/facebookresearch/vilbert-multi-task/pull/37
"""
import os

import numpy as np
import torch
from pytorch_transformers.optimization import (
    AdamW,
    WarmupConstantSchedule,
    WarmupLinearSchedule,
)
from torch.optim.lr_scheduler import CosineAnnealingLR
from tqdm import tqdm

from vilbert.task_utils import ForwardModelsTrain, LoadDatasets, LoadLosses
from vilbert.vilbert import BertConfig, VILBertForVLTasks


def main(args, task_cfg):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    cfg = BertConfig.from_json_file(args.config_file)
    (iters_per_task, batch_per_task, train_sets, val_sets,
     train_loaders, val_loaders) = LoadDatasets(args, task_cfg, args.tasks.split("-"))
    task_keys = list(train_loaders.keys())

    longest = max(
        int(task_cfg[k]["num_epoch"] * n * args.train_iter_multiplier / args.num_train_epochs)
        for k, n in iters_per_task.items()
    )
    total_updates = longest * args.num_train_epochs // args.gradient_accumulation_steps
    n_answers = max(ds.num_labels for ds in train_sets.values())

    net = VILBertForVLTasks.from_pretrained(args.from_pretrained, config=cfg, num_labels=n_answers)
    criteria = LoadLosses(args, task_cfg, args.tasks.split("-"))

    skip_decay = ("bias", "LayerNorm.bias", "LayerNorm.weight")
    groups = []
    for pname, tensor in dict(net.named_parameters()).items():
        if not tensor.requires_grad:
            continue
        group_lr = 1e-4 if "vil_" in pname else args.learning_rate
        decay = 0.0 if any(tag in pname for tag in skip_decay) else 0.01
        groups.append({"params": [tensor], "lr": group_lr, "weight_decay": decay})

    opt = AdamW(groups, lr=args.learning_rate, correct_bias=False)
    n_warm = args.warmup_proportion * total_updates
    linear_decay = args.lr_scheduler == "warmup_linear"
    warm_sched = (WarmupLinearSchedule(opt, warmup_steps=n_warm, t_total=total_updates) if linear_decay
                  else WarmupConstantSchedule(opt, warmup_steps=n_warm))
    cos_sched = None
    if args.lr_scheduler == "cosine":
        cos_sched = CosineAnnealingLR(opt, T_max=longest * args.num_train_epochs)

    net.to(device)
    if torch.cuda.device_count() > 1:
        net = torch.nn.DataParallel(net)

    accum = args.gradient_accumulation_steps
    updates = 0
    iter_state = {k: None for k in task_keys}
    seen = {k: 0 for k in task_keys}
    for epoch in tqdm(range(args.num_train_epochs), desc="Epoch"):
        net.train()
        for it in range(longest):
            lead_task = True
            for key in task_keys:
                loss, acc = ForwardModelsTrain(
                    args, task_cfg, device, key, seen, iter_state,
                    train_loaders, net, criteria,
                )
                loss = loss * task_cfg[key].get("loss_weight", 1.0)
                if accum > 1:
                    loss = loss / accum
                loss.backward()

                if (it + 1) % accum == 0:
                    if lead_task and (updates < n_warm or linear_decay):
                        warm_sched.step()
                    opt.step()
                    net.zero_grad()
                    if lead_task:
                        updates += 1
                        lead_task = False

            if cos_sched is not None and updates > n_warm:
                cos_sched.step()

        ckpt = os.path.join(args.output_dir, "model_epoch_%d.bin" % epoch)
        to_save = net.module if hasattr(net, "module") else net
        torch.save(to_save.state_dict(), ckpt)
        print("epoch", epoch, "lr", np.round(opt.param_groups[0]["lr"], 8))
