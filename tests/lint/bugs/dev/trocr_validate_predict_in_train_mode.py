"""
Shape: a Context dataclass carries model/processor/datasets/loaders; train(ctx, n_epochs) builds transformers AdamW + get_scheduler("linear"), calls ocr.train() once, loops epochs and batches (backward, step, scheduler.step, zero_grad) and calls validate(ctx) after each epoch; validate() calls predict(proc, ocr, dl), which runs ocr.generate under torch.inference_mode(); main_train() wires it together.
Bug: predict()/validate() evaluate the VisionEncoderDecoderModel without ocr.eval(), so dropout is active while the validation accuracy is measured.
Thread: https://github.com/rsommerfeld/trocr/issues/9
"""
from dataclasses import dataclass

import torch
from torch.utils.data import DataLoader
from transformers import AdamW, TrOCRProcessor, VisionEncoderDecoderModel, get_scheduler

from .configs import constants, paths
from .dataset import HCRDataset
from .util import init_model_for_training, load_model, load_processor


@dataclass
class Context:
    ocr: VisionEncoderDecoderModel
    proc: TrOCRProcessor
    tr_set: HCRDataset
    tr_dl: DataLoader
    va_set: HCRDataset
    va_dl: DataLoader


def predict(proc, ocr, dl):
    results = []
    with torch.inference_mode():
        for k, b in enumerate(dl):
            pixels = b["input"].to(constants.device)
            gen = ocr.generate(pixels, return_dict_in_generate=True, output_scores=True)
            texts = proc.batch_decode(gen.sequences, skip_special_tokens=True)
            idxs = [t.item() for t in b["idx"]]
            results.extend(zip(idxs, texts))
    return results


def validate(ctx, print_wrong=False):
    preds = predict(ctx.proc, ctx.ocr, ctx.va_dl)
    right = 0
    for idx, text in preds:
        gold = ctx.va_set.get_label(idx)
        if text == gold:
            right += 1
        elif print_wrong:
            print(f"pred {text!r} gold {gold!r}")
    return right / len(preds)


def train(ctx, n_epochs=5):
    ocr = ctx.ocr
    adamw = AdamW(ocr.parameters(), lr=constants.learning_rate)
    total = n_epochs * len(ctx.tr_dl)
    warm_sched = get_scheduler("linear", optimizer=adamw, num_warmup_steps=0, num_training_steps=total)

    ocr = ocr.to(constants.device)
    ocr.train()

    for ep in range(n_epochs):
        for n, b in enumerate(ctx.tr_dl):
            pixels = b["input"].to(constants.device)
            labels = b["label"].to(constants.device)
            out = ocr(pixel_values=pixels, labels=labels)
            loss = out.loss
            loss.backward()
            adamw.step()
            warm_sched.step()
            adamw.zero_grad()

        if len(ctx.va_dl):
            acc = validate(ctx)
            print(f"ep {ep + 1}: val accuracy {acc}")


def main_train(local=False):
    proc = load_processor()
    tr_set = HCRDataset(paths.train_dir, proc)
    tr_dl = DataLoader(tr_set, constants.batch_size, shuffle=True, num_workers=constants.num_workers)
    va_set = HCRDataset(paths.val_dir, proc)
    va_dl = DataLoader(va_set, constants.batch_size, num_workers=constants.num_workers)
    ocr = load_model(local)
    init_model_for_training(ocr, proc)
    ctx = Context(ocr, proc, tr_set, tr_dl, va_set, va_dl)
    train(ctx, constants.train_epochs)
    ocr.save_pretrained(str(paths.model_path))
