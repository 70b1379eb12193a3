"""
Shape: a NAS training script: `main()` builds a DataParallel slimmable MobileNet, a
`CrossEntropyLoss(reduction='none').cuda()`, SGD with lr scaled by batch size, an ImageFolder
train set and a `data.DataLoader`, then calls `train(loader, model, criterion, optimizer, epoch,
state, args)` each epoch; `train` uses the sandwich rule (max, min and random width configurations,
the smaller ones distilled from the max one) with one zero_grad and one step per batch.
Bug: the train DataLoader is built without `shuffle=True`, and ImageFolder lists samples sorted by
class, so every batch holds a single class (the first batches are all label 0) and the loss
collapses to 0 within a couple of epochs; the reporter fixed it by passing shuffle=True.
Thread: https://github.com/bermanmaxim/AOWS/issues/1
"""
import argparse
import os
import time
from collections import defaultdict

import torch
from torch import nn
from torch.utils import data
from torchvision import datasets, transforms

import misc
from model import SlimMobilenet

cli = argparse.ArgumentParser()
cli.add_argument("--data", default="/imagenet")
cli.add_argument("--workers", type=int, default=4)
cli.add_argument("--epochs", type=int, default=20)
cli.add_argument("--batch-size", type=int, default=512)
cli.add_argument("--lr", type=float, default=0.1)
cli.add_argument("--momentum", type=float, default=0.9)
cli.add_argument("--weight-decay", type=float, default=1e-5)
cli.add_argument("--print-freq", type=int, default=10)


def train(loader, net, crit, sgd, epoch, search_state, args):
    stats = defaultdict(misc.AverageMeter)
    net.train()
    blocks = net.module.filters
    tic = time.time()
    for it, (images, labels) in enumerate(loader):
        labels = labels.cuda(non_blocking=True)
        smallest = [b.configurations[0] for b in blocks]
        largest = [b.configurations[-1] for b in blocks]

        sgd.zero_grad()

        big = net(images, configuration=largest)
        big_loss = crit(big["x"], labels)
        big_loss.mean().backward()
        teacher = torch.nn.functional.softmax(big["x"].detach(), dim=1)

        for cfg in (smallest, None):
            small = net(images, configuration=cfg)
            distill = misc.soft_cross_entropy(small["x"], teacher)
            with torch.no_grad():
                stats["hard_loss"].update(crit(small["x"], labels).mean().item(), images.size(0))
            distill.mean().backward()

        sgd.step()

        stats["batch_time"].update(time.time() - tic)
        tic = time.time()
        if it % args.print_freq == 0:
            print(f"epoch {epoch} it {it}/{len(loader)} max-loss {big_loss.mean().item():.4f}")
    return stats


def main():
    args = cli.parse_args()
    net = nn.DataParallel(SlimMobilenet(min_width=0.2, max_width=1.5, levels=14)).cuda()
    crit = nn.CrossEntropyLoss(reduction="none").cuda()

    args.lr *= args.batch_size / 256
    sgd = torch.optim.SGD(net.parameters(), args.lr, momentum=args.momentum, weight_decay=args.weight_decay)

    norm = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    train_tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                                   transforms.ToTensor(), norm])
    train_set = datasets.ImageFolder(os.path.join(args.data, "train"), train_tf)
    loader = data.DataLoader(train_set, batch_size=args.batch_size, num_workers=args.workers,
                             pin_memory=True)

    search_state = {}
    for epoch in range(args.epochs):
        train(loader, net, crit, sgd, epoch, search_state, args)
        torch.save({"epoch": epoch + 1, "state_dict": net.state_dict(), "optimizer": sgd.state_dict()},
                   f"checkpoint{epoch + 1:03d}.pth")


if __name__ == "__main__":
    main()
