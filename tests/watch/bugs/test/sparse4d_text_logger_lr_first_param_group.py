"""A camera-only 3D detector trained with an mmcv-style iteration runner: the config gives AdamW
with lr 6e-4 and a paramwise_cfg whose custom_keys halve the lr of every parameter under
`img_backbone` (lr_mult 0.5); build_optimizer() turns the model's named parameters into one param
group each, in registration order, applying the multiplier by key. The runner calls its hooks
around model.train_step(): an LrUpdaterHook applies linear warmup and cosine annealing to every
group from its own initial_lr, an OptimizerHook runs zero_grad/backward/grad-clip/step, and a
TextLoggerHook prints the loss and the learning rate every few iterations. The detector creates
`self.img_backbone` before its neck and head.

The logger reads runner.current_lr(), the list of every group's lr, and keeps only element 0,
"the lr of the first param group". Because the image backbone is registered first, that group is
a backbone parameter at half the configured rate, so the log shows a warmup toward 3e-4 and a cosine
from there, while the neck and head, the bulk of the model, train at the configured 6e-4. Nothing
errors; the reported learning rate is off by the backbone multiplier for the whole run, and
someone comparing it with the config concludes the schedule or the lr is wrong.

Thread: https://github.com/linxuewu/Sparse4D/issues/53
"""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

NUM_ANCHORS, NUM_CLASSES = 16, 5

cfg = dict(
    optimizer=dict(type="AdamW", lr=6e-4, weight_decay=0.001,
                   paramwise_cfg=dict(custom_keys={"img_backbone": dict(lr_mult=0.5)})),
    optimizer_config=dict(grad_clip=dict(max_norm=25, norm_type=2)),
    lr_config=dict(policy="CosineAnnealing", warmup="linear", warmup_iters=30, warmup_ratio=1.0 / 3,
                   min_lr_ratio=1e-3),
    total_iters=150,
    log_config=dict(interval=10),
    data=dict(samples_per_gpu=8),
)


class MultiViewFrames(Dataset):
    def __init__(self, n=256, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.cls = torch.randint(0, NUM_CLASSES, (n, NUM_ANCHORS), generator=g)
        self.box = torch.randn(n, NUM_ANCHORS, 3, generator=g)
        basis = torch.randn(NUM_ANCHORS, NUM_CLASSES + 3, 2, 12, 12, generator=torch.Generator().manual_seed(7))
        code = torch.cat([F.one_hot(self.cls, NUM_CLASSES).float(), self.box], -1)  # n, A, C+3
        self.img = torch.einsum("nak,akvhw->nvhw", code, basis) / 4 + 0.1 * torch.randn(n, 2, 12, 12, generator=g)

    def __len__(self):
        return len(self.img)

    def __getitem__(self, i):
        return dict(img=self.img[i], gt_labels_3d=self.cls[i], gt_bboxes_3d=self.box[i])


class Sparse4DHead(nn.Module):
    def __init__(self, embed_dims, num_tokens):
        super().__init__()
        self.instance_feature = nn.Parameter(torch.randn(NUM_ANCHORS, embed_dims) * 0.02)
        self.feature_sampler = nn.Linear(num_tokens * embed_dims, NUM_ANCHORS * embed_dims)
        self.ffn = nn.Sequential(nn.Linear(embed_dims, 2 * embed_dims), nn.ReLU(), nn.Linear(2 * embed_dims, embed_dims))
        self.cls_branch = nn.Linear(embed_dims, NUM_CLASSES)
        self.reg_branch = nn.Linear(embed_dims, 3)

    def forward(self, feat):
        inst = self.instance_feature + self.feature_sampler(feat.flatten(1)).view(len(feat), NUM_ANCHORS, -1)
        inst = inst + self.ffn(inst)
        return self.cls_branch(inst), self.reg_branch(inst)


class Sparse4D(nn.Module):
    def __init__(self, embed_dims=32):
        super().__init__()
        self.img_backbone = nn.Sequential(nn.Conv2d(2, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                                          nn.Conv2d(32, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU())
        self.img_neck = nn.Sequential(nn.Conv2d(32, embed_dims, 1), nn.ReLU())
        self.head = Sparse4DHead(embed_dims, num_tokens=6 * 6)

    def forward_train(self, img, gt_labels_3d, gt_bboxes_3d):
        feat = self.img_neck(self.img_backbone(img))
        cls_scores, box_preds = self.head(feat)
        loss_cls = F.cross_entropy(cls_scores.flatten(0, 1), gt_labels_3d.flatten())
        loss_box = F.l1_loss(box_preds, gt_bboxes_3d)
        return dict(loss_cls=loss_cls, loss_box=loss_box)

    def train_step(self, data, optimizer):
        losses = self.forward_train(**data)
        loss = sum(losses.values())
        log_vars = {k: v.item() for k, v in losses.items()}
        log_vars["loss"] = loss.item()
        return dict(loss=loss, log_vars=log_vars, num_samples=len(data["img"]))


def build_optimizer(model, optimizer_cfg):
    optimizer_cfg = dict(optimizer_cfg)
    paramwise_cfg = optimizer_cfg.pop("paramwise_cfg", {})
    base_lr = optimizer_cfg["lr"]
    params = []
    for name, param in model.named_parameters():
        param_group = {"params": [param]}
        for key, key_cfg in paramwise_cfg.get("custom_keys", {}).items():
            if key in name:
                param_group["lr"] = base_lr * key_cfg.get("lr_mult", 1.0)
                break
        params.append(param_group)
    optimizer_cls = getattr(torch.optim, optimizer_cfg.pop("type"))
    return optimizer_cls(params, **optimizer_cfg)


class Hook:
    priority = 50

    def before_run(self, runner):
        pass

    def before_train_iter(self, runner):
        pass

    def after_train_iter(self, runner):
        pass


class CosineAnnealingLrUpdaterHook(Hook):
    priority = 10

    def __init__(self, warmup_iters, warmup_ratio, min_lr_ratio, **kwargs):
        self.warmup_iters, self.warmup_ratio, self.min_lr_ratio = warmup_iters, warmup_ratio, min_lr_ratio

    def before_run(self, runner):
        for group in runner.optimizer.param_groups:
            group.setdefault("initial_lr", group["lr"])
        self.base_lr = [group["initial_lr"] for group in runner.optimizer.param_groups]

    def get_lr(self, runner, base_lr):
        progress, total = runner.iter, runner.max_iters
        target_lr = base_lr * self.min_lr_ratio
        return target_lr + 0.5 * (base_lr - target_lr) * (1 + math.cos(math.pi * progress / total))

    def before_train_iter(self, runner):
        regular_lr = [self.get_lr(runner, lr) for lr in self.base_lr]
        if runner.iter < self.warmup_iters:
            k = (1 - runner.iter / self.warmup_iters) * (1 - self.warmup_ratio)
            lrs = [lr * (1 - k) for lr in regular_lr]
        else:
            lrs = regular_lr
        for group, lr in zip(runner.optimizer.param_groups, lrs):
            group["lr"] = lr


class OptimizerHook(Hook):
    def __init__(self, grad_clip=None):
        self.grad_clip = grad_clip

    def after_train_iter(self, runner):
        runner.optimizer.zero_grad()
        runner.outputs["loss"].backward()
        if self.grad_clip is not None:
            runner.grad_norm = nn.utils.clip_grad_norm_(runner.model.parameters(), **self.grad_clip).item()
        runner.optimizer.step()


class TextLoggerHook(Hook):
    priority = 90

    def __init__(self, interval=10):
        self.interval = interval

    def after_train_iter(self, runner):
        if (runner.iter + 1) % self.interval != 0:
            return
        log_dict = dict(iter=runner.iter + 1)
        cur_lr = runner.current_lr()
        # only record lr of the first param group
        log_dict["lr"] = cur_lr[0] if isinstance(cur_lr, list) else cur_lr
        log_dict.update(runner.outputs["log_vars"])
        log_dict["grad_norm"] = runner.grad_norm
        log_items = [f"lr: {log_dict['lr']:.3e}"] + [f"{k}: {v:.4f}" for k, v in log_dict.items()
                                                     if k not in ("iter", "lr")]
        print(f"Iter [{log_dict['iter']}/{runner.max_iters}]\t" + ", ".join(log_items))


class IterBasedRunner:
    def __init__(self, model, optimizer, max_iters):
        self.model, self.optimizer, self.max_iters = model, optimizer, max_iters
        self.iter = 0
        self._hooks = []
        self.grad_norm = 0.0

    def register_hook(self, hook):
        self._hooks.append(hook)
        self._hooks.sort(key=lambda h: h.priority)

    def call_hook(self, fn_name):
        for hook in self._hooks:
            getattr(hook, fn_name)(self)

    def current_lr(self):
        return [group["lr"] for group in self.optimizer.param_groups]

    def run(self, data_loader):
        self.call_hook("before_run")
        self.model.train()
        while self.iter < self.max_iters:
            for data_batch in data_loader:
                self.call_hook("before_train_iter")
                self.outputs = self.model.train_step(data_batch, self.optimizer)
                self.call_hook("after_train_iter")
                self.iter += 1
                if self.iter >= self.max_iters:
                    break


def train_detector(model, dataset, cfg):
    data_loader = DataLoader(dataset, batch_size=cfg["data"]["samples_per_gpu"], shuffle=True,
                             generator=torch.Generator().manual_seed(0))
    optimizer = build_optimizer(model, cfg["optimizer"])
    runner = IterBasedRunner(model, optimizer, cfg["total_iters"])
    runner.register_hook(CosineAnnealingLrUpdaterHook(**cfg["lr_config"]))
    runner.register_hook(OptimizerHook(**cfg["optimizer_config"]))
    runner.register_hook(TextLoggerHook(**cfg["log_config"]))
    print(f"optimizer: {cfg['optimizer']['type']} lr={cfg['optimizer']['lr']}, "
          f"{cfg['lr_config']['warmup']} warmup {cfg['lr_config']['warmup_iters']} iters, "
          f"{cfg['lr_config']['policy']}")
    runner.run(data_loader)


if __name__ == "__main__":
    torch.manual_seed(0)
    train_detector(Sparse4D(), MultiViewFrames(), cfg)
