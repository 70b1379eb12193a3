"""
Shape: a gin-configurable `train(...)` function builds `RAFT().cuda()`, gets optimizer and OneCycle
scheduler from a `make_optim(model, num_steps=...)` helper, wraps the net in DataParallel and runs
a `while keep_going:` loop over a shuffled DataLoader with GradScaler, unscale_, grad clipping and
a per-step scheduler.step().
Bug: right after construction the model is put in `.eval()` and nothing ever calls `.train()`, so
the whole training run happens in eval mode (normalisation/dropout layers in inference
behaviour); the maintainer called it an accidental typo and switched it to `.train()`.
Thread: https://github.com/princeton-vl/CER-MVS/issues/2
"""
import time

import gin
import torch
import torch.nn as nn
import torch.optim as optim
from torch.cuda.amp import GradScaler
from torch.utils.data import DataLoader

from core.raft import RAFT
from datasets.blended import Blended
from datasets.dtu import DTU
from loss import sequence_loss
from utils.logger import Logger

DATASETS = {"DTU": DTU, "Blended": Blended}


@gin.configurable("optimizer")
def make_optim(model, wdecay=5e-5, epsilon=1e-8, pct_start=0.001, lr=2.5e-4, num_steps=None):
    adamw = optim.AdamW(model.parameters(), lr=lr, weight_decay=wdecay, eps=epsilon)
    one_cycle = optim.lr_scheduler.OneCycleLR(
        adamw, lr, num_steps + 100, pct_start=pct_start, cycle_momentum=False, anneal_strategy="linear"
    )
    return adamw, one_cycle


@gin.configurable()
def train(name="test", batch_size=2, save_every=5000, dataset_key="Blended", workers=4,
          fixed_weight=None, num_steps=100000):
    net = RAFT().cuda()
    net.eval()

    adamw, one_cycle = make_optim(net, num_steps=num_steps)
    ds = DATASETS[dataset_key]()
    loader = DataLoader(ds, batch_size=batch_size, num_workers=workers, drop_last=True,
                        shuffle=True, pin_memory=True)
    step = 0
    amp_scaler = GradScaler(enabled=True)
    net = nn.DataParallel(net)
    log = Logger(net, one_cycle)

    keep_going = True
    t0 = time.time()
    while keep_going:
        for blob in loader:
            adamw.zero_grad()
            imgs, depth, cams, K = blob
            depth = depth.cuda()[:, [0]]
            inv_depth_gt = torch.where(depth > 0, 1.0 / depth, torch.zeros_like(depth))
            inv_depth_pred = net(imgs.cuda(), cams.cuda(), K.cuda())

            w = fixed_weight if fixed_weight is not None else step * 1.0 / num_steps
            loss, stats = sequence_loss(inv_depth_pred, inv_depth_gt, gradual_weight=w)

            amp_scaler.scale(loss).backward()
            amp_scaler.unscale_(adamw)
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            amp_scaler.step(adamw)
            one_cycle.step()
            amp_scaler.update()

            log.push(stats)
            if step % save_every == save_every - 1:
                torch.save(net.state_dict(), f"checkpoints/{step + 1}_{name}.pth")

            step += 1
            if step > num_steps:
                keep_going = False
                break

    print(f"finished {name} in {time.time() - t0:.0f}s")
    log.close()
