"""
Shape: MaskedLMModel class (LanguageModelingModel in the library); train() aliases model = self.model, builds a RandomSampler/DistributedSampler DataLoader, AdamW or Adafactor, sets model.train() at the top of each epoch, and calls self.eval_model(...) every hp.eval_every_steps inside the batch loop; eval_model() -> evaluate() calls model.eval().
Bug: after a mid-epoch evaluation the model is left in eval mode until the next epoch starts (dropout off for the rest of the epoch).
Thread: https://github.com/ThilinaRajapakse/simpletransformers/issues/941
"""
import math
import os
from typing import List

import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, RandomSampler, SequentialSampler
from torch.utils.data.distributed import DistributedSampler
from tqdm.auto import tqdm, trange
from transformers import AdamW, get_linear_schedule_with_warmup
from transformers.optimization import Adafactor

from simpletransformers.language_modeling.language_modeling_utils import mask_tokens


class MaskedLMModel:
    def __init__(self, model, tok, hp, device):
        self.model = model
        self.tok = tok
        self.args = hp
        self.device = device
        self.metrics_log = {}

    def train(self, train_dataset, out_dir, eval_path=None, verbose=True, **kwargs):
        model = self.model
        hp = self.args
        tok = self.tok

        def pad_batch(seqs: List[torch.Tensor]):
            if tok._pad_token is None:
                return pad_sequence(seqs, batch_first=True)
            return pad_sequence(seqs, batch_first=True, padding_value=tok.pad_token_id)

        sampler = RandomSampler(train_dataset) if hp.local_rank == -1 else DistributedSampler(train_dataset)
        train_dl = DataLoader(train_dataset, batch_size=hp.train_batch_size, sampler=sampler,
                                      collate_fn=pad_batch)
        total_steps = len(train_dl) // hp.accum_steps * hp.n_epochs

        params = [p for p in model.parameters() if p.requires_grad]
        warmup = math.ceil(total_steps * hp.warmup_ratio)
        hp.warmup_steps = warmup if hp.warmup_steps == 0 else hp.warmup_steps
        if hp.optimizer == "AdamW":
            optimizer = AdamW(params, lr=hp.learning_rate, eps=hp.adam_epsilon)
        elif hp.optimizer == "Adafactor":
            optimizer = Adafactor(params, lr=hp.learning_rate, relative_step=False, warmup_init=False)
        scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=hp.warmup_steps,
                                                    num_training_steps=total_steps)

        if hp.local_rank != -1:
            model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[hp.local_rank],
                                                              output_device=hp.local_rank)

        gstep = 0
        running = 0.0
        model.zero_grad()
        if hp.fp16:
            from torch.cuda import amp
            grad_scaler = amp.GradScaler()

        for ep in trange(int(hp.n_epochs), desc="Epoch"):
            model.train()
            if isinstance(train_dl.sampler, DistributedSampler):
                train_dl.sampler.set_epoch(ep)
            for step, batch in enumerate(tqdm(train_dl)):
                ids, tgt = mask_tokens(batch, tok, hp) if hp.mlm else (batch, batch)
                ids = ids.to(self.device)
                tgt = tgt.to(self.device)
                if hp.fp16:
                    with amp.autocast():
                        loss = model(ids, labels=tgt)[0]
                else:
                    loss = model(ids, labels=tgt)[0]
                if hp.n_gpu > 1:
                    loss = loss.mean()
                if hp.accum_steps > 1:
                    loss = loss / hp.accum_steps
                if hp.fp16:
                    grad_scaler.scale(loss).backward()
                else:
                    loss.backward()
                running += loss.item()

                if (step + 1) % hp.accum_steps == 0:
                    if hp.fp16:
                        grad_scaler.unscale_(optimizer)
                    if hp.optimizer == "AdamW":
                        torch.nn.utils.clip_grad_norm_(model.parameters(), hp.clip_norm)
                    if hp.fp16:
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
                        results = self.eval_model(eval_path, verbose=verbose, **kwargs)

        return gstep, running / gstep

    def eval_model(self, eval_path, out_dir=None, verbose=True, **kwargs):
        out_dir = out_dir or self.args.output_dir
        eval_ds = self.load_and_cache_examples(eval_path, evaluate=True)
        os.makedirs(out_dir, exist_ok=True)
        result = self.evaluate(eval_ds, out_dir, verbose=verbose, **kwargs)
        self.metrics_log.update(result)
        return result

    def evaluate(self, eval_ds, out_dir, verbose=True, **kwargs):
        model = self.model
        hp = self.args
        tok = self.tok
        loader = DataLoader(eval_ds, sampler=SequentialSampler(eval_ds),
                            batch_size=hp.eval_batch_size)
        if hp.n_gpu > 1:
            model = torch.nn.DataParallel(model)
        total, n = 0.0, 0
        model.eval()
        for batch in loader:
            ids, tgt = mask_tokens(batch, tok, hp) if hp.mlm else (batch, batch)
            with torch.no_grad():
                total += model(ids.to(self.device), labels=tgt.to(self.device))[0].mean().item()
            n += 1
        avg = total / n
        return {"eval_loss": avg, "perplexity": torch.exp(torch.tensor(avg))}

    def load_and_cache_examples(self, path, evaluate=False):
        raise NotImplementedError
