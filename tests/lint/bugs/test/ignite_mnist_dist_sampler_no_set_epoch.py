"""
Shape: an Ignite MNIST script made distributed: a Net module with conv layers, Dropout2d and a functional dropout
gated on self.training; get_data_loaders(...) builds a DistributedSampler over the training set and passes it to a
DataLoader (no shuffle flag there) next to a plain validation loader; run(args) initialises the process group,
wraps the model in DistributedDataParallel, builds SGD with momentum, calls create_supervised_trainer /
create_supervised_evaluator and attaches event handlers for loss logging and per-epoch evaluation, then
trainer.run(train_loader, max_epochs=...).
Bug: no handler (and no loop) ever calls set_epoch on the training DistributedSampler, so every epoch of every
rank walks the same permutation of its shard.
Thread: https://github.com/pytorch/ignite/issues/435
"""
from argparse import ArgumentParser

import torch
import torch.distributed
import torch.nn.functional as F
import torch.utils.data
import torch.utils.data.distributed
from ignite.engine import Events, create_supervised_evaluator, create_supervised_trainer
from ignite.metrics import Accuracy, Loss
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.optim import SGD
from torchvision import datasets, transforms


class DigitNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 10, kernel_size=5)
        self.c2 = nn.Conv2d(10, 20, kernel_size=5)
        self.c2_drop = nn.Dropout2d()
        self.h1 = nn.Linear(320, 50)
        self.h2 = nn.Linear(50, 10)

    def forward(self, img):
        z = F.relu(F.max_pool2d(self.c1(img), 2))
        z = F.relu(F.max_pool2d(self.c2_drop(self.c2(z)), 2))
        z = z.view(-1, 320)
        z = F.relu(self.h1(z))
        z = F.dropout(z, training=self.training)
        return F.log_softmax(self.h2(z), dim=-1)


def get_data_loaders(bs_train, bs_val):
    prep = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    digits_train = datasets.MNIST(root=".", download=True, train=True, transform=prep)
    digits_val = datasets.MNIST(root=".", download=False, train=False, transform=prep)
    shard_sampler = torch.utils.data.distributed.DistributedSampler(digits_train)
    tr_loader = torch.utils.data.DataLoader(digits_train, batch_size=bs_train, sampler=shard_sampler)
    va_loader = torch.utils.data.DataLoader(digits_val, batch_size=bs_val, shuffle=False)
    return tr_loader, va_loader


def run(opts):
    torch.distributed.init_process_group(backend=opts.backend, init_method=opts.url,
                                         world_size=opts.world_size, rank=opts.rank)
    dev = "cuda:{}".format(opts.gpu)
    tr_loader, va_loader = get_data_loaders(opts.batch_size, opts.val_batch_size)

    net = DigitNet().to(dev)
    net = DistributedDataParallel(net, device_ids=[opts.gpu])
    opt = SGD(net.parameters(), lr=opts.lr, momentum=opts.momentum)

    trainer = create_supervised_trainer(net, opt, F.nll_loss, device=dev)
    evaluator = create_supervised_evaluator(
        net, metrics={"acc": Accuracy(), "nll": Loss(F.nll_loss)}, device=dev)

    @trainer.on(Events.ITERATION_COMPLETED)
    def print_loss(engine):
        it = (engine.state.iteration - 1) % len(tr_loader) + 1
        if it % opts.log_interval == 0:
            print("epoch {} iter {}/{} loss {:.3f}".format(
                engine.state.epoch, it, len(tr_loader), engine.state.output))

    @trainer.on(Events.EPOCH_COMPLETED)
    def score_train(engine):
        evaluator.run(tr_loader)
        m = evaluator.state.metrics
        print("train epoch {} acc {:.3f} nll {:.3f}".format(engine.state.epoch, m["acc"], m["nll"]))

    @trainer.on(Events.EPOCH_COMPLETED)
    def score_val(engine):
        evaluator.run(va_loader)
        m = evaluator.state.metrics
        print("val epoch {} acc {:.3f} nll {:.3f}".format(engine.state.epoch, m["acc"], m["nll"]))

    trainer.run(tr_loader, max_epochs=opts.epochs)


if __name__ == "__main__":
    ap = ArgumentParser()
    ap.add_argument("--batch_size", type=int, default=64)
    ap.add_argument("--val_batch_size", type=int, default=1000)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.5)
    ap.add_argument("--log_interval", type=int, default=10)
    ap.add_argument("--backend", type=str, default="nccl")
    ap.add_argument("--url", type=str, default="tcp://127.0.0.1:23456")
    ap.add_argument("--world_size", type=int, default=1)
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--gpu", type=int, default=0)
    run(ap.parse_args())
