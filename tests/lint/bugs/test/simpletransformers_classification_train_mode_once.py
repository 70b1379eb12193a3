"""
Shape: TextClassifier class (ClassificationModel in the library); train() aliases model = self.model, builds AdamW + get_linear_schedule_with_warmup, calls model.train() once before the epoch loop, and calls self.eval_model(...) every N global steps and at epoch end; eval_model() delegates to evaluate(), which calls model.eval() on self.model.
Bug: model.train() is called once before the loop; after the first evaluation during training the model stays in eval mode for the rest of training.
Thread: https://github.com/ThilinaRajapakse/simpletransformers/issues/739
"""
import math
import os

import numpy as np
import torch
from torch.utils.data import DataLoader, SequentialSampler
from tqdm.auto import tqdm, trange
from transformers import AdamW, get_linear_schedule_with_warmup


class TextClassifier:
    def __init__(self, model, tok, hp, n_labels=2):
        self.model = model
        self.tok = tok
        self.args = hp
        self.n_labels = n_labels
        self.metrics_log = {}

    def train(self, train_dl, out_dir, eval_df=None, verbose=True, **kwargs):
        model = self.model
        hp = self.args

        total_steps = len(train_dl) // hp.accum_steps * hp.n_epochs
        skip = ["bias", "LayerNorm.weight"]
        groups = [
            {"params": [p for n, p in model.named_parameters() if not any(s in n for s in skip)],
             "weight_decay": hp.weight_decay},
            {"params": [p for n, p in model.named_parameters() if any(s in n for s in skip)],
             "weight_decay": 0.0},
        ]
        warmup = math.ceil(total_steps * hp.warmup_ratio)
        hp.warmup_steps = warmup if hp.warmup_steps == 0 else hp.warmup_steps
        optimizer = AdamW(groups, lr=hp.learning_rate, eps=hp.adam_epsilon)
        scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=hp.warmup_steps,
                                                    num_training_steps=total_steps)
        if hp.n_gpu > 1:
            model = torch.nn.DataParallel(model)

        gstep = 0
        running = 0.0
        model.zero_grad()
        epochs = trange(int(hp.n_epochs), desc="Epoch")

        if self.args.fp16:
            from torch.cuda import amp
            grad_scaler = amp.GradScaler()

        model.train()
        for _ in epochs:
            for step, batch in enumerate(tqdm(train_dl)):
                feed = self._batch_to_inputs(batch)
                if self.args.fp16:
                    with amp.autocast():
                        loss = model(**feed)[0]
                else:
                    loss = model(**feed)[0]
                if hp.n_gpu > 1:
                    loss = loss.mean()
                if hp.accum_steps > 1:
                    loss = loss / hp.accum_steps

                if self.args.fp16:
                    grad_scaler.scale(loss).backward()
                else:
                    loss.backward()
                running += loss.item()

                if (step + 1) % hp.accum_steps == 0:
                    if self.args.fp16:
                        grad_scaler.unscale_(optimizer)
                    torch.nn.utils.clip_grad_norm_(model.parameters(), hp.clip_norm)
                    if self.args.fp16:
                        grad_scaler.step(optimizer)
                        grad_scaler.update()
                    else:
                        optimizer.step()
                    scheduler.step()
                    model.zero_grad()
                    gstep += 1

                    if hp.eval_while_training and (
                        hp.eval_every_steps > 0
                        and gstep % hp.eval_every_steps == 0
                    ):
                        results, _, _ = self.eval_model(eval_df, verbose=verbose, **kwargs)

            if hp.eval_while_training and hp.eval_per_epoch:
                results, _, _ = self.eval_model(eval_df, verbose=verbose, **kwargs)

        return gstep, running / gstep

    def eval_model(self, eval_df, out_dir=None, verbose=True, **kwargs):
        out_dir = out_dir or self.args.output_dir
        result, outputs, wrong = self.evaluate(eval_df, out_dir, verbose=verbose, **kwargs)
        self.metrics_log.update(result)
        return result, outputs, wrong

    def evaluate(self, eval_df, out_dir, verbose=True, **kwargs):
        model = self.model
        hp = self.args
        eval_ds = self.load_and_cache_examples(eval_df, evaluate=True)
        os.makedirs(out_dir, exist_ok=True)
        loader = DataLoader(eval_ds, sampler=SequentialSampler(eval_ds),
                            batch_size=hp.eval_batch_size)
        if hp.n_gpu > 1:
            model = torch.nn.DataParallel(model)

        total, n = 0.0, 0
        preds = np.empty((len(eval_ds), self.n_labels))
        model.eval()
        for i, batch in enumerate(loader):
            with torch.no_grad():
                out = model(**self._batch_to_inputs(batch))
                batch_loss, logits = out[:2]
                total += batch_loss.mean().item()
            start = i * hp.eval_batch_size
            preds[start:start + len(logits)] = logits.detach().cpu().numpy()
            n += 1
        return {"eval_loss": total / n}, preds, []

    def _batch_to_inputs(self, batch):
        batch = tuple(t.to(self.args.device) for t in batch)
        return {"input_ids": batch[0], "attention_mask": batch[1], "labels": batch[3]}

    def load_and_cache_examples(self, seqs, evaluate=False):
        raise NotImplementedError
