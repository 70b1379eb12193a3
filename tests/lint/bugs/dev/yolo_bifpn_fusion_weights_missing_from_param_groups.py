"""
Shape: a YOLO-style detection training script into which the user ported a BiFPN-like weighted feature fusion: a WeightedFuse neck block stores its learnable fusion weights as bare nn.Parameter attributes (w1, w2) and normalises them with ReLU before mixing feature maps; train.py builds YoloBody, then sorts parameters into three optimizer groups by walking named_modules() (BatchNorm weights, other .weight tensors with weight decay, .bias tensors), creates SGD on the first group and add_param_group for the others, a step LR scheduler, and a fit_one_epoch(model_train, model, yolo_loss, optimizer, epoch, epoch_step, gen, cuda) helper with a backbone freeze phase.
Bug: the grouping only collects attributes named weight and bias, so the fusion weights w1/w2 never reach any parameter group; they receive gradients but stay at their initial [1, 1] for the whole run.
Thread: https://github.com/bubbliiiing/efficientdet-pytorch/issues/37
"""
import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader

from nets.yolo import YoloBody
from nets.yolo_training import YOLOLoss, weights_init
from utils.dataloader import YoloDataset, yolo_dataset_collate


class WeightedFuse(nn.Module):
    def __init__(self, channels, eps=1e-4):
        super().__init__()
        self.eps = eps
        self.w1 = nn.Parameter(torch.ones(2, dtype=torch.float32))
        self.w2 = nn.Parameter(torch.ones(3, dtype=torch.float32))
        self.act = nn.ReLU()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, p_small, p_big, p_skip=None):
        if p_skip is None:
            w = self.act(self.w1)
            w = w / (w.sum() + self.eps)
            mixed = w[0] * p_small + w[1] * p_big
        else:
            w = self.act(self.w2)
            w = w / (w.sum() + self.eps)
            mixed = w[0] * p_small + w[1] * p_big + w[2] * p_skip
        return self.bn(self.conv(mixed))


def fit_one_epoch(model_train, model, yolo_loss, optimizer, epoch, epoch_step, gen, cuda):
    model_train.train()
    running = 0.0
    for it, (images, targets) in enumerate(gen):
        if it >= epoch_step:
            break
        if cuda:
            images = images.cuda()
            targets = [t.cuda() for t in targets]
        optimizer.zero_grad()
        outputs = model_train(images)
        loss = sum(yolo_loss(l, outputs[l], targets) for l in range(len(outputs)))
        loss.backward()
        optimizer.step()
        running += loss.item()
    print("epoch %d loss %.4f" % (epoch + 1, running / max(epoch_step, 1)))


if __name__ == "__main__":
    cuda = torch.cuda.is_available()
    anchors_mask = [[6, 7, 8], [3, 4, 5], [0, 1, 2]]
    num_classes, input_shape = 20, [640, 640]
    init_lr, momentum, weight_decay = 1e-2, 0.937, 5e-4
    freeze_epoch, total_epoch, batch_size = 50, 300, 16

    model = YoloBody(anchors_mask, num_classes, phi="s")
    weights_init(model)
    yolo_loss = YOLOLoss(num_classes, input_shape, cuda, anchors_mask)
    model_train = torch.nn.DataParallel(model).cuda() if cuda else model

    pg_bn, pg_w, pg_b = [], [], []
    for name, mod in model.named_modules():
        if hasattr(mod, "bias") and isinstance(mod.bias, nn.Parameter):
            pg_b.append(mod.bias)
        if isinstance(mod, nn.BatchNorm2d) or "bn" in name:
            pg_bn.append(mod.weight)
        elif hasattr(mod, "weight") and isinstance(mod.weight, nn.Parameter):
            pg_w.append(mod.weight)
    optimizer = optim.SGD(pg_bn, init_lr, momentum=momentum, nesterov=True)
    optimizer.add_param_group({"params": pg_w, "weight_decay": weight_decay})
    optimizer.add_param_group({"params": pg_b})
    scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.94)

    train_set = YoloDataset(open("2007_train.txt").readlines(), input_shape, num_classes, train=True)
    gen = DataLoader(train_set, shuffle=True, batch_size=batch_size, num_workers=4, pin_memory=True,
                     drop_last=True, collate_fn=yolo_dataset_collate)
    epoch_step = len(train_set) // batch_size

    for p in model.backbone.parameters():
        p.requires_grad = False
    for epoch in range(total_epoch):
        if epoch == freeze_epoch:
            for p in model.backbone.parameters():
                p.requires_grad = True
        fit_one_epoch(model_train, model, yolo_loss, optimizer, epoch, epoch_step, gen, cuda)
        scheduler.step()
