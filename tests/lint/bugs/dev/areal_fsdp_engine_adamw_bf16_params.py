"""
Shape: an RL/SFT framework's FSDPEngine class: initialize() loads the HF causal LM with from_pretrained in the configured dtype (bf16 in the reported recipe), enables gradient checkpointing, shards it with FSDP2 fully_shard under a MixedPrecisionPolicy whose param_dtype is that same dtype, then a create_optimizer() method builds torch.optim.AdamW over self.model.parameters() plus a transformers cosine schedule with warmup; train_batch(mb_list, loss_fn) accumulates micro-batch losses, clips the gradient norm, steps the optimizer and the scheduler.
Bug: the parameters are stored in bf16 because the model is loaded in the compute dtype, so AdamW keeps its moments and updates in bf16 with no fp32 master copy; small late-stage updates round away and the SFT loss plateaus about three times higher than the fp32-master DeepSpeed and Megatron runs.
Thread: https://github.com/areal-project/AReaL/issues/1292
"""
import torch
import torch.distributed as dist
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from transformers import AutoModelForCausalLM, get_cosine_schedule_with_warmup

from areal.api.cli_args import TrainEngineConfig
from areal.utils.data import pack_micro_batches


class FSDPEngine:
    def __init__(self, config: TrainEngineConfig):
        self.config = config
        self.model = None
        self.optimizer = None
        self.lr_scheduler = None
        self.dtype = getattr(torch, config.dtype)

    def initialize(self, total_steps: int):
        device = torch.device("cuda", dist.get_rank() % torch.cuda.device_count())
        lm = AutoModelForCausalLM.from_pretrained(
            self.config.path, torch_dtype=self.dtype, attn_implementation="flash_attention_2")
        if self.config.gradient_checkpointing:
            lm.gradient_checkpointing_enable()
        policy = MixedPrecisionPolicy(param_dtype=self.dtype, reduce_dtype=torch.float32)
        for block in lm.model.layers:
            fully_shard(block, mp_policy=policy)
        fully_shard(lm, mp_policy=policy)
        self.model = lm.to(device)
        self.create_optimizer(total_steps)

    def create_optimizer(self, total_steps: int):
        oc = self.config.optimizer
        if oc.type != "adam":
            raise ValueError("only adam is wired here")
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(),
            lr=oc.lr,
            weight_decay=oc.weight_decay,
            betas=(oc.beta1, oc.beta2),
            eps=oc.eps,
        )
        warmup = int(oc.warmup_steps_proportion * total_steps)
        self.lr_scheduler = get_cosine_schedule_with_warmup(self.optimizer, warmup, total_steps)

    def train_batch(self, batch, loss_fn):
        self.model.train()
        self.optimizer.zero_grad()
        mbs = pack_micro_batches(batch, self.config.mb_spec)
        n_tokens = sum(int(mb["loss_mask"].sum()) for mb in mbs)
        for mb in mbs:
            logits = self.model(input_ids=mb["input_ids"], attention_mask=mb["attention_mask"]).logits
            loss = loss_fn(logits, mb) * (mb["loss_mask"].sum() / max(n_tokens, 1))
            loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.optimizer.gradient_clipping)
        if torch.isfinite(grad_norm):
            self.optimizer.step()
        else:
            self.optimizer.zero_grad()
        self.lr_scheduler.step()
        return {"grad_norm": float(grad_norm), "lr": self.lr_scheduler.get_last_lr()[0]}
