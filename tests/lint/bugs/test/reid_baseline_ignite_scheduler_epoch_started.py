"""
Shape: re-ID baseline package on pytorch-ignite: a factory build_supervised_trainer(model, optimizer, loss_fn, device) returns an Engine whose _update closure runs model.train(), zero_grad, forward (score, feat), loss_fn(score, feat, target), backward and optimizer.step(); run_training(cfg, model, train_loader, val_loader, optimizer, scheduler, loss_fn, num_query) attaches handlers with @train_engine.on(Events...) (checkpointing, timer, running averages, logging, periodic R1/mAP evaluation) and calls train_engine.run; launch(cfg) builds the loaders, the model, the optimizer and a WarmupMultiStepLR from the config and passes them in.
Bug: the handler that calls scheduler.step() is registered on Events.EPOCH_STARTED, so the schedule is advanced at the start of each epoch, before any of that epoch's optimizer.step() calls; the first value of the warmup schedule is skipped.
Thread: https://github.com/michuanhaohao/reid-strong-baseline/issues/190
"""
import logging

import torch
from ignite.engine import Engine, Events
from ignite.handlers import ModelCheckpoint, Timer
from ignite.metrics import RunningAverage

from data import make_data_loader
from layers import make_loss
from modeling import build_model
from solver import WarmupMultiStepLR, make_optimizer
from utils.reid_metric import R1_mAP


def build_supervised_trainer(model, optimizer, loss_fn, device=None):
    if device:
        model.to(device)

    def _update(engine, batch):
        model.train()
        optimizer.zero_grad()
        imgs, pids = batch
        imgs, pids = imgs.cuda(), pids.cuda()
        score, feat = model(imgs)
        loss = loss_fn(score, feat, pids)
        loss.backward()
        optimizer.step()
        acc = (score.max(1)[1] == pids).float().mean()
        return loss.item(), acc.item()

    return Engine(_update)


def build_supervised_evaluator(model, metrics, device=None):
    if device:
        model.to(device)

    def _infer(engine, batch):
        model.eval()
        with torch.no_grad():
            imgs, pids, camids = batch
            return model(imgs.cuda()), pids, camids

    evaluator = Engine(_infer)
    for name, metric in metrics.items():
        metric.attach(evaluator, name)
    return evaluator


def run_training(cfg, model, train_loader, val_loader, optimizer, scheduler, loss_fn, num_query):
    log = logging.getLogger("reid_baseline.train")
    device = cfg.MODEL.DEVICE
    train_engine = build_supervised_trainer(model, optimizer, loss_fn, device=device)
    evaluator = build_supervised_evaluator(
        model, metrics={'r1_mAP': R1_mAP(num_query, max_rank=50, feat_norm=cfg.TEST.FEAT_NORM)}, device=device)
    saver = ModelCheckpoint(cfg.OUTPUT_DIR, cfg.MODEL.NAME, cfg.SOLVER.CHECKPOINT_PERIOD, n_saved=10,
                            require_empty=False)
    timer = Timer(average=True)

    train_engine.add_event_handler(Events.EPOCH_COMPLETED, saver,
                              {'model': model.state_dict(), 'optimizer': optimizer.state_dict()})
    timer.attach(train_engine, start=Events.EPOCH_STARTED, resume=Events.ITERATION_STARTED,
                 pause=Events.ITERATION_COMPLETED, step=Events.ITERATION_COMPLETED)
    RunningAverage(output_transform=lambda out: out[0]).attach(train_engine, 'avg_loss')
    RunningAverage(output_transform=lambda out: out[1]).attach(train_engine, 'avg_acc')

    @train_engine.on(Events.EPOCH_STARTED)
    def step_lr(engine):
        scheduler.step()

    @train_engine.on(Events.ITERATION_COMPLETED)
    def log_loss(engine):
        it = (engine.state.iteration - 1) % len(train_loader) + 1
        if it % cfg.SOLVER.LOG_PERIOD == 0:
            log.info("Epoch[%d] Iter[%d/%d] loss %.3f acc %.3f lr %.2e", engine.state.epoch, it,
                     len(train_loader), engine.state.metrics['avg_loss'],
                     engine.state.metrics['avg_acc'], scheduler.get_lr()[0])

    @train_engine.on(Events.EPOCH_COMPLETED)
    def evaluate(engine):
        if engine.state.epoch % cfg.SOLVER.EVAL_PERIOD == 0:
            evaluator.run(val_loader)
            cmc, mAP = evaluator.state.metrics['r1_mAP']
            log.info("Epoch %d mAP %.1f%% rank-1 %.1f%%", engine.state.epoch, mAP * 100, cmc[0] * 100)

    train_engine.run(train_loader, max_epochs=cfg.SOLVER.MAX_EPOCHS)


def launch(cfg):
    train_loader, val_loader, num_query, num_classes = make_data_loader(cfg)
    model = build_model(cfg, num_classes)
    optimizer = make_optimizer(cfg, model)
    scheduler = WarmupMultiStepLR(optimizer, cfg.SOLVER.STEPS, cfg.SOLVER.GAMMA, cfg.SOLVER.WARMUP_FACTOR,
                                  cfg.SOLVER.WARMUP_ITERS, cfg.SOLVER.WARMUP_METHOD)
    loss_fn = make_loss(cfg, num_classes)
    run_training(cfg, model, train_loader, val_loader, optimizer, scheduler, loss_fn, num_query)
