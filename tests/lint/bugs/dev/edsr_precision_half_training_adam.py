"""
Shape: EDSR-style project: a Model(nn.Module) wrapper that imports the network by name, moves it to the device and calls self.model.half() when args.precision == 'half'; utility.make_optimizer(args, model) picks SGD/ADAM/RMSprop from args (ADAM with eps=args.epsilon, default 1e-8); a Trainer class holding optimizer and StepLR scheduler, whose train() prepares half inputs, skips batches whose loss explodes, and whose terminate() drives the main while-loop.
Bug: running with --precision half trains the .half() network with Adam at eps 1e-8 (unrepresentable in fp16), so the loss goes inf and every batch is skipped.
Thread: https://github.com/sanghyun-son/EDSR-PyTorch/issues/36
"""
from importlib import import_module

import torch
import torch.nn as nn
import torch.optim as optim
import torch.optim.lr_scheduler as lrs

from option import args
import data
import loss
import utility


class Model(nn.Module):
    def __init__(self, args, ckp):
        super(Model, self).__init__()
        self.scale = args.scale
        self.precision = args.precision
        self.device = torch.device("cpu" if args.cpu else "cuda")
        self.n_GPUs = args.n_GPUs
        module = import_module("model." + args.model.lower())
        self.model = module.make_model(args).to(self.device)
        if args.precision == "half":
            self.model.half()
        if not args.cpu and args.n_GPUs > 1:
            self.model = nn.DataParallel(self.model, range(args.n_GPUs))

    def get_model(self):
        return self.model if self.n_GPUs == 1 else self.model.module

    def forward(self, x, idx_scale):
        target = self.get_model()
        if hasattr(target, "set_scale"):
            target.set_scale(idx_scale)
        return self.model(x)


def make_optimizer(args, my_model):
    trainable = filter(lambda p: p.requires_grad, my_model.parameters())
    if args.optimizer == "SGD":
        opt_cls = optim.SGD
        kwargs = {"momentum": args.momentum}
    elif args.optimizer == "ADAM":
        opt_cls = optim.Adam
        kwargs = {"betas": (args.beta1, args.beta2), "eps": args.epsilon}
    elif args.optimizer == "RMSprop":
        opt_cls = optim.RMSprop
        kwargs = {"eps": args.epsilon}
    kwargs["lr"] = args.lr
    kwargs["weight_decay"] = args.weight_decay
    return opt_cls(trainable, **kwargs)


def make_scheduler(args, my_optimizer):
    return lrs.StepLR(my_optimizer, step_size=args.lr_decay, gamma=args.gamma)


class Trainer:
    def __init__(self, args, loader, my_model, my_loss, ckp):
        self.args = args
        self.ckp = ckp
        self.loader_train = loader.loader_train
        self.loader_test = loader.loader_test
        self.model = my_model
        self.loss = my_loss
        self.optimizer = make_optimizer(args, self.model)
        self.scheduler = make_scheduler(args, self.optimizer)
        self.error_last = 1e8

    def train(self):
        self.scheduler.step()
        self.loss.step()
        self.loss.start_log()
        self.model.train()
        for batch, (lr, hr, _, idx_scale) in enumerate(self.loader_train):
            lr, hr = self.prepare([lr, hr])
            self.optimizer.zero_grad()
            sr = self.model(lr, idx_scale)
            loss = self.loss(sr, hr)
            if loss.item() < self.args.skip_threshold * self.error_last:
                loss.backward()
                self.optimizer.step()
            else:
                print("batch {} skipped, loss {}".format(batch + 1, loss.item()))
        self.loss.end_log(len(self.loader_train))
        self.error_last = self.loss.log[-1, -1]

    def test(self):
        self.model.eval()
        with torch.no_grad():
            for idx_scale, scale in enumerate(self.args.scale):
                for lr, hr, _, _ in self.loader_test:
                    lr, hr = self.prepare([lr, hr])
                    sr = utility.quantize(self.model(lr, idx_scale), self.args.rgb_range)
                    utility.calc_psnr(sr, hr, scale, self.args.rgb_range)

    def prepare(self, tensors):
        device = torch.device("cpu" if self.args.cpu else "cuda")

        def _prepare(t):
            if self.args.precision == "half":
                t = t.half()
            return t.to(device)

        return [_prepare(t) for t in tensors]

    def terminate(self):
        if self.args.test_only:
            self.test()
            return True
        return self.scheduler.last_epoch + 1 >= self.args.epochs


torch.manual_seed(args.seed)
checkpoint = utility.checkpoint(args)
if checkpoint.ok:
    loader = data.Data(args)
    net = Model(args, checkpoint)
    criterion = loss.Loss(args, checkpoint) if not args.test_only else None
    t = Trainer(args, loader, net, criterion, checkpoint)
    while not t.terminate():
        t.train()
        t.test()
