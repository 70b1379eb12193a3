"""A point-cloud segmentation framework's training loop with checkpoint resume: a BaseModel owns
its optimizer and a dict of schedulers, and optimize_parameters() runs forward/backward/step and
ticks the lr scheduler according to its update_scheduler_on setting ("on_epoch" here). A
ModelCheckpoint keeps, after every epoch, the weights, the optimizer as (class name, state_dict)
and each scheduler as (scheduler options, state_dict). On resume, Checkpoint.get_optimizer()
rebuilds the optimizer and loads its state, which brings back the decayed lr; only then does
Checkpoint.get_schedulers() build the lr scheduler on that optimizer from its options and load the
scheduler state.

Building the LambdaLR-based exponential scheduler on the already-loaded optimizer writes
initial_lr * lambda(0), the starting lr, back into every param group; loading the scheduler state
afterwards restores its step counter but not the groups' lr. So the first resumed epoch, late in
the schedule, runs at the full initial learning rate instead of the decayed one. Nothing errors;
the printed lr jumps back up after the resume, the nearly converged segmentation network is knocked
out of its minimum and the remaining low-lr epochs do not bring it back to where an uninterrupted
run ends.

Thread: https://github.com/torch-points3d/torch-points3d/pull/630
"""
import copy
import sys

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, Dataset

NUM_POINTS, NUM_CLASSES = 64, 4


class LambdaStepLR(LambdaLR):
    def __init__(self, optimizer, lr_lambda, last_step=-1):
        super().__init__(optimizer, lr_lambda, last_step)


class ExpLR(LambdaStepLR):
    def __init__(self, optimizer, step_size, gamma=0.9, last_step=-1):
        super().__init__(optimizer, lambda s: gamma ** (s / step_size), last_step)


_custom_lr_scheduler = sys.modules[__name__]


class LRScheduler:
    def __init__(self, scheduler, scheduler_opt):
        self._scheduler = scheduler
        self.scheduler_opt = scheduler_opt
        self.update_scheduler_on = scheduler_opt["update_scheduler_on"]

    def step(self):
        self._scheduler.step()

    def state_dict(self):
        return self._scheduler.state_dict()

    def load_state_dict(self, state_dict):
        self._scheduler.load_state_dict(state_dict)


def instantiate_scheduler(optimizer, scheduler_opt):
    try:
        scheduler_cls = getattr(torch.optim.lr_scheduler, scheduler_opt["class"])
    except AttributeError:
        scheduler_cls = getattr(_custom_lr_scheduler, scheduler_opt["class"])
    return LRScheduler(scheduler_cls(optimizer, **scheduler_opt["params"]), scheduler_opt)


class ShapePartDataset(Dataset):
    """Clouds of points in a unit cube; a point's part label depends on where it sits in its cloud."""

    def __init__(self, num_clouds, seed):
        g = torch.Generator().manual_seed(seed)
        self.pos = torch.rand(num_clouds, NUM_POINTS, 3, generator=g) * 2 - 1
        shift = 0.3 * torch.randn(num_clouds, 1, 3, generator=g)
        rel = self.pos - self.pos.mean(1, keepdim=True) + shift
        self.y = (rel[..., 0] > 0).long() + 2 * (rel[..., 1] + 0.5 * rel[..., 2] > 0).long()

    def __len__(self):
        return len(self.pos)

    def __getitem__(self, i):
        return {"pos": self.pos[i], "y": self.y[i]}


class BaseModel(nn.Module):
    def __init__(self, opt):
        super().__init__()
        self.opt = opt
        self._optimizer = None
        self._lr_scheduler = None
        self.schedulers = {}

    @property
    def optimizer(self):
        return self._optimizer

    @optimizer.setter
    def optimizer(self, optimizer):
        self._optimizer = optimizer

    @property
    def schedulers(self):
        return self._schedulers

    @schedulers.setter
    def schedulers(self, schedulers):
        self._schedulers = schedulers or {}
        self._lr_scheduler = self._schedulers.get("lr_scheduler")

    def instantiate_optimizers(self, config):
        optimizer_opt = config["training"]["optim"]["optimizer"]
        self._optimizer = getattr(torch.optim, optimizer_opt["class"])(self.parameters(), **optimizer_opt["params"])
        self.schedulers = {"lr_scheduler": instantiate_scheduler(self._optimizer,
                                                                 config["training"]["optim"]["lr_scheduler"])}

    def optimize_parameters(self, epoch, batch_size):
        self.forward()
        self._optimizer.zero_grad()
        self.backward()
        self._optimizer.step()

    def update_schedulers_on_epoch(self):
        if self._lr_scheduler is not None and self._lr_scheduler.update_scheduler_on == "on_epoch":
            self._lr_scheduler.step()

    def get_current_lr(self):
        return self._optimizer.param_groups[0]["lr"]


class PointNetSeg(BaseModel):
    def __init__(self, opt):
        super().__init__(opt)
        self.local = nn.Sequential(nn.Linear(3, 64), nn.ReLU(), nn.Linear(64, 128), nn.ReLU())
        self.head = nn.Sequential(nn.Linear(128 + 128, 128), nn.ReLU(), nn.Linear(128, NUM_CLASSES))

    def set_input(self, data):
        self.input = data["pos"]
        self.labels = data["y"]

    def forward(self):
        local = self.local(self.input)
        glob = local.max(1, keepdim=True).values.expand_as(local)
        self.output = self.head(torch.cat([local, glob], -1))
        self.loss_seg = F.cross_entropy(self.output.reshape(-1, NUM_CLASSES), self.labels.reshape(-1))
        return self.output

    def backward(self):
        self.loss_seg.backward()


class Checkpoint:
    def __init__(self):
        self.models = {}
        self.optimizer = None
        self.schedulers = {}
        self.run_config = None
        self.stats = {}
        self._filled = False

    @property
    def is_empty(self):
        return not self._filled

    def save_objects(self, models_to_save, stage, current_stat, optimizer, schedulers, run_config):
        self.models = {k: copy.deepcopy(v) for k, v in models_to_save.items()}
        self.optimizer = [optimizer.__class__.__name__, copy.deepcopy(optimizer.state_dict())]
        self.schedulers = {name: [s.scheduler_opt, copy.deepcopy(s.state_dict())] for name, s in schedulers.items()}
        self.run_config = run_config
        self.stats.setdefault(stage, []).append(current_stat)
        self._filled = True

    def get_optimizer(self, model, load_state=True):
        optimizer_cls = getattr(torch.optim, self.optimizer[0])
        optimizer_params = self.run_config["training"]["optim"]["optimizer"]["params"]
        optimizer = optimizer_cls(model.parameters(), **optimizer_params)
        if load_state:
            optimizer.load_state_dict(self.optimizer[1])
        return optimizer

    def get_schedulers(self, model, load_state=True):
        schedulers_out = {}
        for scheduler_type, (scheduler_opt, scheduler_state) in self.schedulers.items():
            if scheduler_type == "lr_scheduler":
                scheduler = instantiate_scheduler(model.optimizer, scheduler_opt)
                if load_state:
                    scheduler.load_state_dict(scheduler_state)
                schedulers_out["lr_scheduler"] = scheduler
        return schedulers_out


class ModelCheckpoint:
    def __init__(self, checkpoint=None, resume=True):
        self._checkpoint = checkpoint if checkpoint is not None else Checkpoint()
        self._resume = resume

    @property
    def start_epoch(self):
        return len(self._checkpoint.stats.get("train", [])) + 1 if self._resume else 1

    def create_model(self, run_config):
        model = PointNetSeg(run_config)
        if not self._checkpoint.is_empty:
            model.load_state_dict(self._checkpoint.models["latest"], strict=False)
            model.optimizer = self._checkpoint.get_optimizer(model, load_state=self._resume)
            model.schedulers = self._checkpoint.get_schedulers(model, load_state=self._resume)
        else:
            model.instantiate_optimizers(run_config)
        return model

    def save_best_models_under_current_metrics(self, model, metrics, run_config):
        self._checkpoint.save_objects({"latest": model.state_dict()}, "train", metrics, model.optimizer,
                                      model.schedulers, run_config)


def evaluate(model, loader):
    model.eval()
    correct = total = 0
    loss = 0.0
    with torch.no_grad():
        for data in loader:
            model.set_input(data)
            out = model.forward()
            loss += model.loss_seg.item() * len(data["y"])
            correct += (out.argmax(-1) == model.labels).sum().item()
            total += model.labels.numel()
    model.train()
    return loss / len(loader.dataset), correct / total


def train(run_config, model_checkpoint, train_loader, val_loader, stop_after=None):
    model = model_checkpoint.create_model(run_config)
    for epoch in range(model_checkpoint.start_epoch, run_config["training"]["epochs"] + 1):
        lr = model.get_current_lr()
        model.train()
        for data in train_loader:
            model.set_input(data)
            model.optimize_parameters(epoch, run_config["training"]["batch_size"])
        model.update_schedulers_on_epoch()
        val_loss, val_acc = evaluate(model, val_loader)
        print(f"epoch {epoch:2d}  lr {lr:.2e}  train_loss {model.loss_seg.item():.4f}  "
              f"val_loss {val_loss:.4f}  val_acc {val_acc:.4f}")
        model_checkpoint.save_best_models_under_current_metrics(model, {"val_acc": val_acc}, run_config)
        if stop_after is not None and epoch == stop_after:
            print("-- job preempted, restarting from the last checkpoint --")
            return model_checkpoint._checkpoint
    return None


def main():
    torch.manual_seed(0)
    run_config = {
        "training": {
            "epochs": 12, "batch_size": 32,
            "optim": {
                "optimizer": {"class": "Adam", "params": {"lr": 0.01}},
                "lr_scheduler": {"class": "ExpLR", "params": {"step_size": 3, "gamma": 0.1},
                                 "update_scheduler_on": "on_epoch"},
            },
        },
    }
    train_loader = DataLoader(ShapePartDataset(512, seed=0), batch_size=32, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    val_loader = DataLoader(ShapePartDataset(256, seed=1), batch_size=64)
    checkpoint = train(run_config, ModelCheckpoint(), train_loader, val_loader, stop_after=9)
    train(run_config, ModelCheckpoint(checkpoint, resume=True), train_loader, val_loader)  # --resume


if __name__ == "__main__":
    main()
