"""
Shape: An ignite Engine subclass holding model/crit/optimizer/lr_scheduler/config on self, with a
@staticmethod train(engine, mini_batch) step that zeroes grads only when
iteration % iteration_per_update == 1 and steps the optimizer (through a GradScaler on GPU) when the
remainder is 0, so gradient accumulation is driven by the config.
Bug: with the default iteration_per_update == 1 the remainder is always 0, so the zero_grad branch
never runs; gradients from every batch keep summing into .grad and each step uses the running total.
Thread: https://github.com/kh-kim/simple-nmt/pull/22
"""
import numpy as np
import torch
from torch.cuda.amp import autocast, GradScaler
from ignite.engine import Engine, Events


class MLEEngine(Engine):

    def __init__(self, step_fn, model, crit, optimizer, lr_scheduler, config):
        self.model = model
        self.crit = crit
        self.optimizer = optimizer
        self.lr_scheduler = lr_scheduler
        self.config = config
        super().__init__(step_fn)
        self.best_loss = np.inf
        self.scaler = GradScaler()

    @staticmethod
    def train(engine, mini_batch):
        engine.model.train()
        if engine.state.iteration % engine.config.iteration_per_update == 1:
            engine.optimizer.zero_grad()

        device = next(engine.model.parameters()).device
        src = (mini_batch.src[0].to(device), mini_batch.src[1])
        tgt_ids = mini_batch.tgt[0].to(device)
        gold = tgt_ids[:, 1:]

        with autocast():
            logits = engine.model(src, tgt_ids[:, :-1])
            loss = engine.crit(
                logits.contiguous().view(-1, logits.size(-1)),
                gold.contiguous().view(-1),
            )
            to_backward = loss.div(gold.size(0)).div(engine.config.iteration_per_update)

        if engine.config.gpu_id >= 0:
            engine.scaler.scale(to_backward).backward()
        else:
            to_backward.backward()

        n_words = int(mini_batch.tgt[1].sum())

        if engine.state.iteration % engine.config.iteration_per_update == 0:
            if engine.config.gpu_id >= 0:
                engine.scaler.step(engine.optimizer)
                engine.scaler.update()
            else:
                engine.optimizer.step()

            if engine.config.use_noam_decay and engine.lr_scheduler is not None:
                engine.lr_scheduler.step()

        word_loss = float(loss / n_words)
        return {"loss": word_loss, "ppl": np.exp(word_loss)}

    @staticmethod
    def validate(engine, mini_batch):
        engine.model.eval()
        with torch.no_grad():
            device = next(engine.model.parameters()).device
            src = (mini_batch.src[0].to(device), mini_batch.src[1])
            tgt_ids = mini_batch.tgt[0].to(device)
            with autocast():
                logits = engine.model(src, tgt_ids[:, :-1])
                loss = engine.crit(
                    logits.contiguous().view(-1, logits.size(-1)),
                    tgt_ids[:, 1:].contiguous().view(-1),
                )
        word_loss = float(loss / int(mini_batch.tgt[1].sum()))
        return {"loss": word_loss, "ppl": np.exp(word_loss)}


def build_engines(model, crit, optimizer, lr_scheduler, config):
    trainer = MLEEngine(MLEEngine.train, model, crit, optimizer, lr_scheduler, config)
    evaluator = MLEEngine(MLEEngine.validate, model, crit, optimizer, lr_scheduler, config)

    @trainer.on(Events.EPOCH_COMPLETED)
    def run_validation(engine, valid_loader=None):
        if valid_loader is not None:
            evaluator.run(valid_loader, max_epochs=1)

    return trainer, evaluator
