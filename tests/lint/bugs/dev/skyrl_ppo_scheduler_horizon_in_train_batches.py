"""
Shape: a Ray-based PPO trainer split over classes: RayPPOTrainer computes total_training_steps = len(train_dataloader) * epochs (one step per rollout batch) and hands it to each policy/critic worker as init_model(model_path, num_training_steps=...); the worker builds an FSDPStrategy(num_training_steps=...) whose prepare() creates AdamW and a transformers get_scheduler(name, optimizer, num_warmup_steps, num_training_steps) from that value; the strategy's optimizer_step(optimizer, model, scheduler) clips, steps the optimizer and then the scheduler; the worker's ppo_train(train_data) splits each rollout batch into mini-batches (and micro-batches for accumulation) and calls optim_step() once per mini-batch, for update_epochs_per_batch passes.
Bug: the scheduler is stepped once per optimizer (mini-batch) step, but its horizon counts rollout batches; with train_batch_size / policy_mini_batch_size * update_epochs_per_batch optimizer steps per batch, a cosine or linear schedule reaches its end that many times too early.
Thread: https://github.com/NovaSky-AI/SkyRL/pull/873
"""
import torch
import torch.optim as optim
from transformers import get_scheduler

from skyrl_train.dataset import BatchIterator
from skyrl_train.models import HFModelWrapper
from skyrl_train.utils import build_dataloader


class FSDPStrategy:
    def __init__(self, fsdp_config, optimizer_config=None, micro_train_batch_size_per_gpu=1,
                 num_training_steps=None):
        self.fsdp_config = fsdp_config
        self.optimizer_config = optimizer_config
        self.max_norm = optimizer_config.max_grad_norm if optimizer_config is not None else 1.0
        self.micro_train_batch_size_per_gpu = micro_train_batch_size_per_gpu
        self.total_training_steps = num_training_steps

    def prepare(self, model):
        fsdp_module = self.wrap_fsdp(model)
        cfg = self.optimizer_config
        optimizer = optim.AdamW(fsdp_module.parameters(), lr=cfg.lr, betas=cfg.adam_betas,
                                weight_decay=cfg.weight_decay)
        scheduler = get_scheduler(cfg.scheduler, optimizer, num_warmup_steps=cfg.num_warmup_steps,
                                  num_training_steps=self.total_training_steps)
        return fsdp_module, optimizer, scheduler

    def wrap_fsdp(self, model):
        raise NotImplementedError

    def backward(self, loss, model, optimizer):
        loss.backward()

    def optimizer_step(self, optimizer, model, scheduler):
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=self.max_norm)
        if not torch.isfinite(grad_norm):
            optimizer.zero_grad()
            return grad_norm
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        optimizer.zero_grad()
        return grad_norm


class PolicyWorker:
    def __init__(self, cfg):
        self.cfg = cfg

    def init_model(self, model_path, num_training_steps=None):
        self.strategy = FSDPStrategy(fsdp_config=self.cfg.trainer.policy.fsdp_config,
                                     optimizer_config=self.cfg.trainer.policy.optimizer_config,
                                     micro_train_batch_size_per_gpu=self.cfg.trainer.micro_train_batch_size_per_gpu,
                                     num_training_steps=num_training_steps)
        wrapped = HFModelWrapper(model_path, bf16=False)
        self.model, self.optimizer, self.scheduler = self.strategy.prepare(wrapped)

    def forward_backward(self, experience, microbatch_weight):
        loss = self.model.policy_loss(experience) * microbatch_weight
        self.strategy.backward(loss, self.model, self.optimizer)
        return {"policy_loss": loss.item()}

    def optim_step(self):
        return self.strategy.optimizer_step(self.optimizer, self.model, self.scheduler)

    def ppo_train(self, train_data):
        minibatches = BatchIterator(train_data, sample_batch_size=self.cfg.trainer.policy_mini_batch_size,
                                    drop_last=False)
        statuses = []
        for _ in range(self.cfg.trainer.update_epochs_per_batch):
            for minibatch in minibatches:
                micro = BatchIterator(minibatch, sample_batch_size=self.cfg.trainer.micro_train_batch_size_per_gpu,
                                      drop_last=False)
                weight = 1.0 / len(micro)
                for mb in micro:
                    status = self.forward_backward(BatchIterator.batch_to_experience(mb), microbatch_weight=weight)
                grad_norm = self.optim_step()
                status["grad_norm"] = float(grad_norm)
                status["policy_lr"] = self.scheduler.get_last_lr()[0]
                statuses.append(status)
        return statuses


class RayPPOTrainer:
    def __init__(self, cfg, generator):
        self.cfg = cfg
        self.generator = generator
        self.train_dataloader = build_dataloader(cfg, is_train=True)
        self.total_training_steps = len(self.train_dataloader) * cfg.trainer.epochs

    def build_models(self):
        self.policy = PolicyWorker(self.cfg)
        self.policy.init_model(self.cfg.trainer.policy.model.path,
                               num_training_steps=self.total_training_steps)

    def train(self):
        self.global_step = 0
        for _ in range(self.cfg.trainer.epochs):
            for prompts in self.train_dataloader:
                batch = self.generator.rollout(prompts)
                self.policy.ppo_train(batch)
                self.global_step += 1
