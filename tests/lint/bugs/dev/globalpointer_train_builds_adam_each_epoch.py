"""
Shape: module-level script; gp_model = GlobalPointer(BertModel encoder).to(dev) at import time; train(gp_model, batches, epoch) defines the loss as a nested function, builds Adam and a CAWR/StepLR scheduler, then loops batches through train_step(batch, model, optimizer, criterion); validate(gp_model, batches) helper; __main__ calls train()/validate() once per epoch.
Bug: the Adam optimizer (and its scheduler) is constructed inside train(), which runs every epoch, so optimizer state and the lr schedule restart each epoch.
Thread: https://github.com/gaohongkui/GlobalPointer_pytorch/issues/7
"""
import glob
import os

import torch
from torch.utils.data import DataLoader
from tqdm import tqdm
from transformers import BertModel

import config
from common.utils import multilabel_categorical_crossentropy
from models.GlobalPointer import GlobalPointer, MetricsCalculator

cfg = config.train_config
hp = cfg["hyper_parameters"]
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(hp["seed"])
scorer = MetricsCalculator()


def build_loaders():
    raise NotImplementedError


def train_step(batch, gp_model, optimizer, criterion):
    _, ids, mask, tt_ids, labels = batch
    ids, mask, tt_ids, labels = ids.to(dev), mask.to(dev), tt_ids.to(dev), labels.to(dev)
    logits = gp_model(ids, mask, tt_ids)
    loss = criterion(labels, logits)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    prec = scorer.get_sample_precision(logits, labels)
    f1 = scorer.get_sample_f1(logits, labels)
    return loss.item(), prec.item(), f1.item()


encoder = BertModel.from_pretrained(cfg["bert_path"])
gp_model = GlobalPointer(encoder, cfg["ent_type_size"], 64)
gp_model.to(dev)


def train(gp_model, batches, epoch):
    gp_model.train()

    def span_loss(y_true, y_pred):
        bs, n_types = y_pred.shape[:2]
        y_true = y_true.reshape(bs * n_types, -1)
        y_pred = y_pred.reshape(bs * n_types, -1)
        return multilabel_categorical_crossentropy(y_true, y_pred)

    lr0 = float(hp["lr"])
    optimizer = torch.optim.Adam(gp_model.parameters(), lr=lr0)

    if hp["scheduler"] == "CAWR":
        scheduler = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(
            optimizer, len(batches) * hp["rewarm_epoch_num"], hp["T_mult"])
    elif hp["scheduler"] == "Step":
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=hp["decay_steps"],
                                                    gamma=hp["decay_rate"])

    tot_loss, tot_prec, tot_f1 = 0., 0., 0.
    for i, batch in enumerate(batches):
        loss, prec, f1 = train_step(batch, gp_model, optimizer, span_loss)
        tot_loss += loss
        tot_prec += prec
        tot_f1 += f1
        scheduler.step()
        print(f'epoch {epoch + 1} batch {i + 1}/{len(batches)} loss {tot_loss / (i + 1):.4f} '
              f'lr {optimizer.param_groups[0]["lr"]}')


def validate_step(batch, gp_model):
    _, ids, mask, tt_ids, labels = batch
    ids, mask, tt_ids, labels = ids.to(dev), mask.to(dev), tt_ids.to(dev), labels.to(dev)
    with torch.inference_mode():
        logits = gp_model(ids, mask, tt_ids)
    return scorer.get_evaluate_fpr(logits, labels)


def validate(gp_model, batches):
    gp_model.eval()
    tot = 0.
    for batch in tqdm(batches, desc="Validating"):
        f1, _, _ = validate_step(batch, gp_model)
        tot += f1
    return tot / len(batches)


if __name__ == '__main__':
    tr_batches, va_batches = build_loaders()
    best_f1 = 0.
    for epoch in range(hp["epochs"]):
        train(gp_model, tr_batches, epoch)
        dev_f1 = validate(gp_model, va_batches)
        if dev_f1 > best_f1:
            best_f1 = dev_f1
            n_saved = len(glob.glob(cfg["save_dir"] + "/model_state_dict_*.pt"))
            torch.save(gp_model.state_dict(), os.path.join(cfg["save_dir"], "model_state_dict_{}.pt".format(n_saved)))
