"""
Shape: args-driven package layout flattened; MolPropertyNet builds self.ffn as an nn.Sequential that gets nn.Sigmoid() appended when args.dataset_type == 'classification'; make_criterion(args) factory returns nn.BCELoss(reduction='none'); train(model, data, crit, optimizer, sched, args) masks and class-weights the per-element loss; run_training wires them together.
Bug: for classification the network's last layer is a Sigmoid and the factory returns nn.BCELoss, the numerically fragile pair instead of BCEWithLogitsLoss on logits.
Thread: https://github.com/wengong-jin/chemprop/issues/7
"""
from argparse import Namespace

import torch
import torch.nn as nn
from torch.nn.utils import clip_grad_norm_
from tqdm import trange

from chemprop.models.mpn import MPN
from chemprop.nn_utils import NoamLR, get_activation_function, initialize_weights


class MolPropertyNet(nn.Module):
    def __init__(self):
        super().__init__()

    def create_encoder(self, args: Namespace):
        self.encoder = MPN(args)

    def create_ffn(self, args: Namespace):
        in_dim = args.hidden_size
        ffn_layers = [nn.Dropout(args.ffn_input_dropout), nn.Linear(in_dim, args.ffn_hidden_size)]
        for _layer in range(args.ffn_num_layers - 2):
            ffn_layers.extend([get_activation_function(args.activation), nn.Dropout(args.ffn_dropout),
                           nn.Linear(args.ffn_hidden_size, args.ffn_hidden_size)])
        ffn_layers.extend([get_activation_function(args.activation), nn.Dropout(args.ffn_dropout),
                       nn.Linear(args.ffn_hidden_size, args.output_size)])
        if "classification" == args.dataset_type:
            ffn_layers.append(nn.Sigmoid())
        self.ffn = nn.Sequential(*ffn_layers)

    def forward(self, *inputs):
        return self.ffn(self.encoder(*inputs))


def build_model(args: Namespace) -> nn.Module:
    args.output_size = args.num_tasks
    model = MolPropertyNet()
    model.create_encoder(args)
    model.create_ffn(args)
    initialize_weights(model=model, args=args)
    return model


def make_criterion(args: Namespace) -> nn.Module:
    kind = args.dataset_type
    if kind == "classification":
        return torch.nn.BCELoss(reduction="none")
    if kind == "regression":
        return torch.nn.MSELoss(reduction="none")
    raise ValueError(args.dataset_type)


def train(model, data, crit, optimizer, sched, args, seen=0):
    model.train()
    data.shuffle()
    num_iters = len(data) // args.batch_size * args.batch_size
    for i in trange(0, num_iters, args.batch_size):
        chunk = data.slice(i, i + args.batch_size)
        smiles = chunk.smiles()
        extra_feats = chunk.features()
        raw_targets = chunk.targets()
        valid = torch.Tensor([[v is not None for v in row] for row in raw_targets])
        y = torch.Tensor([[0 if v is None else v for v in row] for row in raw_targets])
        if args.cuda:
            valid = valid.cuda()
            y = y.cuda()
        task_w = torch.ones_like(y)

        model.zero_grad()
        y_hat = model(smiles, extra_feats)
        loss = crit(y_hat, y) * task_w * valid
        loss = loss.sum() / valid.sum()

        loss.backward()
        if args.max_grad_norm:
            clip_grad_norm_(model.parameters(), max_norm=args.max_grad_norm)
        optimizer.step()
        if isinstance(sched, NoamLR):
            sched.step()
        seen += len(chunk)
    return seen


def run_training(args: Namespace, train_data):
    crit = make_criterion(args)
    model = build_model(args)
    if args.cuda:
        model = model.cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.init_lr, weight_decay=args.weight_decay)
    sched = NoamLR(optimizer, warmup_epochs=args.warmup_epochs, total_epochs=args.epochs,
                       steps_per_epoch=len(train_data) // args.batch_size,
                       init_lr=args.init_lr, max_lr=args.max_lr, final_lr=args.final_lr)
    seen = 0
    for _epoch in trange(args.epochs):
        seen = train(model=model, data=train_data, crit=crit, optimizer=optimizer,
                       sched=sched, args=args, seen=seen)
    return model
