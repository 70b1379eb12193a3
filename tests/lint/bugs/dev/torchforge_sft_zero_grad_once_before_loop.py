"""
Shape: SFT recipe class deriving from a titan engine base that builds self.model_parts / self.optimizers / self.lr_schedulers; fwd_bwd() does the forward and loss.backward(), one_step() steps the optimizer and scheduler, train() drives a while loop over next(dataloader).
Bug: self.optimizers.zero_grad() is called once in train(), before the while loop; one_step() steps every iteration and never zeroes again, so gradients accumulate across all steps.
Thread: https://github.com/meta-pytorch/torchforge/pull/71
"""
import sys

import torch
import torchtitan.experiments.forge.engine as titan_engine
from torchtitan.experiments.forge.job_config import JobCfg as JobCfg
from tqdm import tqdm

import forge.cli.config as forge_cli
from forge.data.datasets.sft_dataset import build_sft_loader


class SupervisedRecipe(titan_engine.ForgeEngine):
    def __init__(self, jcfg: JobCfg):
        self.step_idx = 0
        self.total_steps = jcfg.training.steps
        super().__init__(jcfg)

    def setup(self):
        self.train_dataloader = build_sft_loader(
            self.job_config.dataset, batch_size=self.job_config.training.local_batch_size,
            device=self.device,
        )
        self.checkpointer.load(step=self.step_idx)

    def fwd_bwd(self, input_dict, labels, do_backward=True):
        model_parts = self.model_parts
        inputs = input_dict["tokens"]
        with self.train_context(None):
            assert len(model_parts) == 1
            with self.maybe_enable_amp:
                logits = model_parts[0](inputs)
                loss = self.loss_fn(logits, labels)
            del logits
            if do_backward:
                loss.backward()
        return loss

    def one_step(self, batch):
        labels = batch.pop("labels")
        loss = self.fwd_bwd(batch, labels)
        self.pbar.update(1)
        self.pbar.set_description("{}|loss {}".format(self.step_idx, loss))

        self.optimizers.step()
        self.lr_schedulers.step()

    def train(self):
        loader = iter(self.train_dataloader)
        self.optimizers.zero_grad()
        self.pbar = tqdm(initial=0, total=self.total_steps)

        while self.step_idx < self.total_steps:
            batch = next(loader)
            for key, value in batch.items():
                if isinstance(value, torch.Tensor):
                    batch[key] = value.to("cuda")
            self.one_step(batch)
            self.step_idx += 1
            self.checkpointer.save(
                curr_step=self.step_idx,
                last_step=self.step_idx == self.total_steps,
            )


@forge_cli.parse
def recipe_main(cfg):
    recipe = SupervisedRecipe(cfg)
    recipe.setup()
    recipe.train()


if __name__ == "__main__":
    sys.exit(recipe_main())
