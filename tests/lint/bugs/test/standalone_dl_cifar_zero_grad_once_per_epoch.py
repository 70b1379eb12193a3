"""
Shape: notebook-style functions; run_train(cnn, splits, opt, ce, args) builds its own DataLoader and runs one epoch; run_experiment() builds CNN/CrossEntropyLoss/optimizer from args and calls run_train() then run_val() per epoch.
Bug: opt.zero_grad() is called once at the top of run_train(), before the batch loop, while step() runs every batch, so gradients accumulate over the whole epoch.
Thread: https://github.com/heartcored98/Standalone-DeepLearning/issues/11
"""
import time

import torch
import torch.nn as nn
import torch.optim as optim

vgg_plans = {
    "VGG11": [64, "M", 128, "M"] + [256, 256, "M"] + [512, 512, "M"] * 2,
}


class CNN(nn.Module):
    def __init__(self, arch, c_in, n_out, act_name, with_bn):
        super(CNN, self).__init__()
        if act_name == "relu":
            self.act = nn.ReLU()
        elif act_name == "sigmoid":
            self.act = nn.Sigmoid()
        else:
            raise ValueError("unknown activation")
        self.features = self._build(arch, c_in, with_bn)
        self.head = nn.Sequential(nn.Linear(512, 256), self.act, nn.Linear(256, n_out))

    def forward(self, x):
        x = self.features(x)
        x = x.view(x.size(0), -1)
        return self.head(x)

    def _build(self, arch, c_in, with_bn):
        blocks = []
        for width in vgg_plans[arch]:
            if width == "M":
                blocks.append(nn.MaxPool2d(kernel_size=2, stride=2))
                continue
            blocks.append(nn.Conv2d(c_in, width, kernel_size=3, stride=1, padding=1))
            if with_bn:
                blocks.append(nn.BatchNorm2d(width))
            blocks.append(self.act)
            c_in = width
        return nn.Sequential(*blocks)


def run_train(cnn, splits, opt, ce, args):
    loader = torch.utils.data.DataLoader(splits["train"], batch_size=args.train_batch_size,
                                         shuffle=True, num_workers=2)
    cnn.train()
    opt.zero_grad()

    hits, seen, running = 0, 0, 0.0
    for i, (images, labels) in enumerate(loader):
        images = images.cuda()
        labels = labels.cuda()
        logits = cnn(images)

        loss = ce(logits, labels)
        loss.backward()
        opt.step()

        running += loss.item()
        _, guess = torch.max(logits.data, 1)
        seen += labels.size(0)
        hits += (guess == labels).sum().item()

    return cnn, running / len(loader), 100 * hits / seen


def run_val(cnn, splits, ce, args):
    loader = torch.utils.data.DataLoader(splits["val"], batch_size=args.test_batch_size,
                                         shuffle=False, num_workers=2)
    cnn.eval()
    hits, seen, running = 0, 0, 0.0
    with torch.no_grad():
        for images, labels in loader:
            images, labels = images.cuda(), labels.cuda()
            logits = cnn(images)
            running += ce(logits, labels).item()
            _, guess = torch.max(logits.data, 1)
            seen += labels.size(0)
            hits += (guess == labels).sum().item()
    return running / len(loader), 100 * hits / seen


def run_experiment(splits, args):
    cnn = CNN(arch=args.model_code, c_in=args.in_channels,
              n_out=args.out_dim, act_name=args.act, with_bn=args.use_bn)
    cnn.cuda()

    ce = nn.CrossEntropyLoss(reduction="mean")
    if args.optim == "SGD":
        opt = optim.SGD(cnn.parameters(), weight_decay=args.l2, lr=args.lr)
    elif args.optim == "RMSprop":
        opt = optim.RMSprop(cnn.parameters(), weight_decay=args.l2, lr=args.lr)
    elif args.optim == "Adam":
        opt = optim.Adam(cnn.parameters(), weight_decay=args.l2, lr=args.lr)
    else:
        raise ValueError("unknown opt")

    log_rows = []
    for epoch in range(args.epoch):
        started = time.time()
        cnn, tr_loss, tr_acc = run_train(cnn, splits, opt, ce, args)
        va_loss, va_acc = run_val(cnn, splits, ce, args)
        log_rows.append((tr_loss, va_loss, tr_acc, va_acc, time.time() - started))
    return log_rows
