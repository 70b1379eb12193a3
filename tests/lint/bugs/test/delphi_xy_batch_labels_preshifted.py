"""
Shape: small-LM pretraining package: a ModelTrainingState dataclass holding model and AdamW, the model built as getattr(transformers, cfg["model_class"])(its config_class(**cfg)); get_xy_batch(...) slices a batch out of a datasets.Dataset and returns (X, Y), gen_minibatches(...) yields them, and accumulate_gradients(model, batches, n) calls model(X, labels=Y, return_dict=True).loss / n inside train_step.
Bug: get_xy_batch returns tokens[:, :-1] as inputs and tokens[:, 1:] as labels, and the *ForCausalLM model shifts labels once more inside forward, so every position is trained on the token two ahead.
Thread: https://github.com/delphi-suite/delphi/pull/134
"""
import time
from collections.abc import Generator, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
import transformers
from datasets import Dataset
from torch.optim import AdamW
from transformers import PreTrainedModel


@dataclass
class ModelTrainingState:
    model: PreTrainedModel
    optimizer: torch.optim.Optimizer
    iter_num: int = field(metadata={"help": "iterations across all epochs"})
    last_step_time: float = field(metadata={"help": "wall time of the last step"})
    epoch: int = 0
    step: int = 0
    lr: float = 1.0e-5
    train_loss: float = 0.0


def build_model(model_cfg: dict[str, Any], seed: int) -> PreTrainedModel:
    torch.random.manual_seed(seed)
    cls = getattr(transformers, model_cfg["model_class"])
    kwargs = {k: v for k, v in model_cfg.items() if k != "model_class"}
    return cls(cls.config_class(**kwargs))


def init_state(cfg, device: torch.device) -> ModelTrainingState:
    model = build_model(cfg.model_config, seed=cfg.torch_seed)
    model.to(device)
    opt = AdamW(
        params=model.parameters(),
        lr=cfg.adam.learning_rate,
        weight_decay=cfg.adam.weight_decay,
        betas=(cfg.adam.beta1, cfg.adam.beta2),
    )
    return ModelTrainingState(model=model, optimizer=opt, iter_num=0, last_step_time=time.time())


def get_xy_batch(ds: Dataset, order: list[int], bsz: int, batch_no: int, column: str,
                 device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    rows = order[batch_no * bsz:(batch_no + 1) * bsz]
    tokens = ds[rows][column].to(device)
    return tokens[:, :-1], tokens[:, 1:]


def gen_minibatches(ds: Dataset, bsz: int, n_micro: int, step: int, order: list[int],
                    device: torch.device, column: str) -> Generator[tuple[torch.Tensor, torch.Tensor], None, None]:
    micro = bsz // n_micro
    first = n_micro * step
    for i in range(n_micro):
        yield get_xy_batch(ds, order, micro, first + i, column, device)


def accumulate_gradients(model: PreTrainedModel, batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
                         n_batches: int) -> float:
    total = 0.0
    for X, Y in batches:
        loss = model(X, labels=Y, return_dict=True).loss / n_batches
        total += loss.item()
        loss.backward()
    return total


def train_step(state: ModelTrainingState, train_ds: Dataset, cfg, device: torch.device, order: list[int]):
    model = state.model
    opt = state.optimizer
    batches = gen_minibatches(train_ds, cfg.batch_size, cfg.gradient_accumulation_steps, state.step,
                              order, device, cfg.dataset.feature)
    state.train_loss = accumulate_gradients(model, batches, cfg.gradient_accumulation_steps)
    if cfg.grad_clip != 0.0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
    opt.step()
    opt.zero_grad(set_to_none=True)


@torch.no_grad()
def estimate_loss(model, eval_iters: int, bsz: int, splits: dict[str, Dataset], device, column: str):
    out = {}
    model.eval()
    for name, ds in splits.items():
        order = list(range(len(ds)))
        n = min(eval_iters, len(ds) // bsz)
        vals = torch.zeros(n)
        for k, (X, Y) in enumerate(gen_minibatches(ds, bsz, n, 0, order, device, column)):
            vals[k] = model(X, labels=Y, return_dict=True).loss.item()
        out[name] = vals.mean().item()
    model.train()
    return out
