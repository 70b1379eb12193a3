"""
Shape: LoRA fine-tuning script for a music diffusion transformer on PyTorch Lightning: a Pipeline(LightningModule) whose __init__ saves hyperparameters (learning_rate, max_steps, warmup_steps, ...), loads the pretrained pipeline, adds a LoRA adapter to the transformer and freezes the encoders; training_step delegates to a run_step helper (preprocess, flow-matching noise, masked MSE plus projection losses, self.log of the loss and of self.lr_schedulers().get_last_lr()); configure_optimizers builds AdamW over the trainable params and a LambdaLR with linear warmup over warmup_steps then linear decay to max_steps; main(args) builds the module and a Trainer(max_epochs, max_steps, accumulate_grad_batches, DDP) and calls fit.
Bug: configure_optimizers returns the bare LambdaLR (`[optimizer], scheduler`) with no "interval": "step", so Lightning ticks it once per epoch; the warmup and decay written in optimizer steps (4000 warmup steps by default) would take thousands of epochs.
Thread: https://github.com/ace-step/ACE-Step/pull/198
"""
import argparse
import json
from datetime import datetime

import torch
import torch.nn.functional as F
from pytorch_lightning import Trainer
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.core import LightningModule
from pytorch_lightning.loggers import TensorBoardLogger
from torch.utils.data import DataLoader

from peft import LoraConfig

from acestep.pipeline_ace_step import ACEStepPipeline
from acestep.text2music_dataset import Text2MusicDataset


class Pipeline(LightningModule):
    def __init__(self, learning_rate=1e-4, num_workers=4, weight_decay=1e-2, max_steps=200000,
                 warmup_steps=4000, dataset_path="./data/your_dataset_path", checkpoint_dir=None,
                 lora_config_path=None, adapter_name="lora_adapter"):
        super().__init__()
        self.save_hyperparameters()
        pipe = ACEStepPipeline(checkpoint_dir)
        pipe.load_checkpoint(pipe.checkpoint_dir)
        self.transformers = pipe.ace_step_transformer.float().cpu()
        self.transformers.enable_gradient_checkpointing()
        with open(lora_config_path, encoding="utf-8") as fh:
            lora_cfg = LoraConfig(**json.load(fh))
        self.transformers.add_adapter(adapter_config=lora_cfg, adapter_name=adapter_name)
        self.dcae = pipe.music_dcae.float().cpu()
        self.dcae.requires_grad_(False)
        self.text_encoder_model = pipe.text_encoder_model.float().cpu()
        self.text_encoder_model.requires_grad_(False)
        self.transformers.train()

    def preprocess(self, batch):
        raise NotImplementedError

    def run_step(self, batch, batch_idx):
        latents, attn_mask, text_states, text_mask, noise_sigmas = self.preprocess(batch)
        noise = torch.randn_like(latents)
        noisy = noise_sigmas * noise + (1.0 - noise_sigmas) * latents
        out = self.transformers(hidden_states=noisy, attention_mask=attn_mask,
                                encoder_text_hidden_states=text_states, text_attention_mask=text_mask)
        pred = out.sample * (-noise_sigmas) + noisy
        bsz = latents.shape[0]
        mask = attn_mask.unsqueeze(1).unsqueeze(1).expand(-1, latents.shape[1], latents.shape[2], -1)
        loss = F.mse_loss((pred * mask).reshape(bsz, -1), (latents * mask).reshape(bsz, -1), reduction="none")
        loss = (loss.mean(1) * mask.reshape(bsz, -1).mean(1)).mean()
        self.log("train/denoising_loss", loss, on_step=True, on_epoch=False, prog_bar=True)
        proj = [v for _, v in out.proj_losses]
        if proj:
            loss = loss + sum(proj) / len(proj)
        if self.lr_schedulers() is not None:
            self.log("train/learning_rate", self.lr_schedulers().get_last_lr()[0], on_step=True,
                     on_epoch=False, prog_bar=True)
        return loss

    def training_step(self, batch, batch_idx):
        return self.run_step(batch, batch_idx)

    def configure_optimizers(self):
        trainable = [p for _, p in self.transformers.named_parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params=[{"params": trainable}], lr=self.hparams.learning_rate,
                                      weight_decay=self.hparams.weight_decay, betas=(0.8, 0.9))
        total = self.hparams.max_steps
        warm = self.hparams.warmup_steps

        def lr_lambda(step):
            if step < warm:
                return float(step) / float(max(1, warm))
            frac = float(step - warm) / float(max(1, total - warm))
            return max(0.0, 1.0 - frac)

        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda, last_epoch=-1)
        return [optimizer], scheduler

    def train_dataloader(self):
        ds = Text2MusicDataset(train=True, train_dataset_path=self.hparams.dataset_path)
        return DataLoader(ds, shuffle=True, num_workers=self.hparams.num_workers, pin_memory=True,
                          collate_fn=ds.collate_fn)


def main(args):
    model = Pipeline(learning_rate=args.learning_rate, num_workers=args.num_workers, max_steps=args.max_steps,
                     dataset_path=args.dataset_path, checkpoint_dir=args.checkpoint_dir,
                     adapter_name=args.exp_name, lora_config_path=args.lora_config_path)
    trainer = Trainer(accelerator="gpu", devices=args.devices, precision=args.precision,
                      accumulate_grad_batches=args.accumulate_grad_batches,
                      strategy="ddp_find_unused_parameters_true", max_epochs=args.epochs,
                      max_steps=args.max_steps, log_every_n_steps=1,
                      logger=TensorBoardLogger(save_dir=args.logger_dir,
                                               version=datetime.now().strftime("%Y-%m-%d_%H-%M-%S")),
                      callbacks=[ModelCheckpoint(monitor=None, every_n_train_steps=args.every_n_train_steps,
                                                 save_top_k=-1)],
                      gradient_clip_val=args.gradient_clip_val)
    trainer.fit(model, ckpt_path=args.ckpt_path)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--learning_rate", type=float, default=1e-4)
    p.add_argument("--num_workers", type=int, default=8)
    p.add_argument("--epochs", type=int, default=-1)
    p.add_argument("--max_steps", type=int, default=2000000)
    p.add_argument("--every_n_train_steps", type=int, default=2000)
    p.add_argument("--dataset_path", type=str, default="./zh_lora_dataset")
    p.add_argument("--exp_name", type=str, default="chinese_rap_lora")
    p.add_argument("--precision", type=str, default="32")
    p.add_argument("--accumulate_grad_batches", type=int, default=1)
    p.add_argument("--devices", type=int, default=1)
    p.add_argument("--logger_dir", type=str, default="./exps/logs/")
    p.add_argument("--ckpt_path", type=str, default=None)
    p.add_argument("--checkpoint_dir", type=str, default=None)
    p.add_argument("--gradient_clip_val", type=float, default=0.5)
    p.add_argument("--lora_config_path", type=str, default="config/zh_rap_lora_config.json")
    main(p.parse_args())
