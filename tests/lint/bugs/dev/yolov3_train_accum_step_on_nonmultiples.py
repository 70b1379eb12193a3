"""
Shape: A top-level YOLOv3 train script: argparse options (including --gradient_accumulations),
Darknet(cfg).to(device) with a loss returned from model(imgs, targets), a shuffled ListDataset
loader, Adam over model.parameters(), and a batches_done counter that gates the optimizer step.
Bug: the accumulation gate tests `batches_done % n` for truthiness, so optimizer.step()/zero_grad()
fire on every batch that is NOT a multiple of n (nearly every micro-batch), and the summed detection
loss is never divided by the number of accumulated batches.
Thread: https://github.com/eriklindernoren/PyTorch-YOLOv3/pull/313
"""
import argparse
import time

import torch
from torch.autograd import Variable

from models import Darknet
from utils.datasets import ListDataset
from utils.parse_config import parse_data_config
from utils.utils import weights_init_normal


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--batch_size", type=int, default=8)
    ap.add_argument("--gradient_accumulations", type=int, default=2)
    ap.add_argument("--model_def", type=str, default="config/yolov3.cfg")
    ap.add_argument("--data_config", type=str, default="config/coco.data")
    ap.add_argument("--pretrained_weights", type=str)
    ap.add_argument("--n_cpu", type=int, default=8)
    ap.add_argument("--multiscale_training", default=True)
    args = ap.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    data_cfg = parse_data_config(args.data_config)
    train_list = data_cfg["train"]

    net = Darknet(args.model_def).to(device)
    net.apply(weights_init_normal)
    if args.pretrained_weights:
        if args.pretrained_weights.endswith(".pth"):
            net.load_state_dict(torch.load(args.pretrained_weights))
        else:
            net.load_darknet_weights(args.pretrained_weights)

    train_set = ListDataset(train_list, augment=True, multiscale=args.multiscale_training)
    loader = torch.utils.data.DataLoader(
        train_set,
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=args.n_cpu,
        pin_memory=True,
        collate_fn=train_set.collate_fn,
    )

    optimizer = torch.optim.Adam(net.parameters())

    for epoch in range(args.epochs):
        net.train()
        t0 = time.time()
        for batch_i, (_, imgs, targets) in enumerate(loader):
            batches_done = len(loader) * epoch + batch_i

            imgs = Variable(imgs.to(device))
            targets = Variable(targets.to(device), requires_grad=False)

            loss, outputs = net(imgs, targets)
            loss.backward()

            if batches_done % args.gradient_accumulations:
                optimizer.step()
                optimizer.zero_grad()

            print("[epoch %d/%d, batch %d/%d] loss %.4f"
                  % (epoch, args.epochs, batch_i, len(loader), loss.item()))

        print("epoch time %.1fs" % (time.time() - t0))
        torch.save(net.state_dict(), "checkpoints/yolov3_ckpt_%d.pth" % epoch)
