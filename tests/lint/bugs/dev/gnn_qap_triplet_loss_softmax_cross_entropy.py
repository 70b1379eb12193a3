"""
Shape: graph-matching project: a triplet_loss nn.Module whose __init__ takes loss=nn.CrossEntropyLoss(reduction='sum') as a default argument and whose forward loops over the batch of (n, n) score matrices; a QAP_Experiment experiment class that stores self.criterion = triplet_loss(...); trainer.train_triplet(train_loader, model, optimizer, helper, device, epoch) calling helper.criterion(raw_scores, target); commander.train() building model, Adam + ReduceLROnPlateau from get_optimizer and looping epochs.
Bug: triplet_loss.forward applies torch.softmax(raw_scores, -1) and then feeds the probabilities to its CrossEntropyLoss.
Thread: https://github.com/mlelarge/graph_neural_net/pull/37
"""
import time

import torch
import torch.nn as nn
from torch.nn import CrossEntropyLoss

from loaders.data_generator import QAP_Generator
from loaders.siamese_loaders import siamese_loader
from models import get_model
from toolbox import metrics
from toolbox.utils import get_device


class triplet_loss(nn.Module):
    def __init__(self, loss_reduction="mean", loss=nn.CrossEntropyLoss(reduction="sum")):
        super(triplet_loss, self).__init__()
        self.loss = loss
        if loss_reduction == "mean":
            self.increments = lambda new_loss, n_vertices: (new_loss, n_vertices)
        elif loss_reduction == "mean_of_mean":
            self.increments = lambda new_loss, n_vertices: (new_loss / n_vertices, 1)
        else:
            raise ValueError(loss_reduction)

    def forward(self, raw_scores, target_dummy):
        device = get_device(raw_scores)
        loss = 0
        total = 0
        outputs = torch.softmax(raw_scores, -1)
        for out in outputs:
            n_vertices = out.shape[0]
            target = torch.arange(n_vertices).to(device)
            part, count = self.increments(self.loss(out, target), n_vertices)
            loss += part
            total += count
        return loss / total


class QAP_Experiment:
    def __init__(self, name, loss_reduction="mean", loss=CrossEntropyLoss(reduction="sum")):
        self.name = name
        self.generator = QAP_Generator
        self.criterion = triplet_loss(loss_reduction=loss_reduction, loss=loss)
        self.eval_function = metrics.accuracy_max


def get_optimizer(args, model):
    optimizer = torch.optim.Adam(model.parameters(), lr=args["lr"], amsgrad=False)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=args["scheduler_decay"], patience=args["scheduler_step"])
    return optimizer, scheduler


def train_triplet(train_loader, model, optimizer, helper, device, epoch, eval_score=False, print_freq=100):
    model.train()
    for i, (data, target) in enumerate(train_loader):
        start = time.time()
        data = data.to(device)
        target_deviced = target.to(device)
        raw_scores = model(data)
        loss = helper.criterion(raw_scores, target_deviced)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if i % print_freq == 0 and eval_score:
            helper.eval_function(raw_scores, target_deviced)


def val_triplet(val_loader, model, helper, device, epoch):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for data, target in val_loader:
            raw_scores = model(data.to(device))
            total += helper.criterion(raw_scores, target.to(device)).item()
    return total / max(len(val_loader), 1)


def train(cpu, train, train_data_dict, arch):
    device = "cuda" if (not cpu and torch.cuda.is_available()) else "cpu"
    exp_helper = QAP_Experiment("qap")
    gene_train = exp_helper.generator("train", train_data_dict)
    gene_train.load_dataset()
    train_loader = siamese_loader(gene_train, train["batch_size"], gene_train.constant_n_vertices)
    gene_val = exp_helper.generator("val", train_data_dict)
    gene_val.load_dataset()
    val_loader = siamese_loader(gene_val, train["batch_size"], gene_val.constant_n_vertices)
    model = get_model(arch)
    optimizer, scheduler = get_optimizer(train, model)
    model.to(device)
    for epoch in range(train["epoch"]):
        train_triplet(train_loader, model, optimizer, exp_helper, device, epoch, eval_score=True, print_freq=train["print_freq"])
        val_loss = val_triplet(val_loader, model, exp_helper, device, epoch)
        scheduler.step(val_loss)
