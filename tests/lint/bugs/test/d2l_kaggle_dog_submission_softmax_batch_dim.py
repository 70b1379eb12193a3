"""
Shape: a d2l-style notebook turned script: module-level ImageFolder datasets and DataLoaders, a get_net(devices)
factory that hangs a frozen pretrained torchvision ResNet-34 (features) and a small Linear head (output_new) on an
nn.Sequential, a module-level CrossEntropyLoss(reduction='none'), an evaluate_loss(data_iter, net, devices) helper
and a train(net, train_iter, valid_iter, num_epochs, lr, wd, devices, lr_period, lr_decay) function that wraps the net
in DataParallel, builds SGD over the trainable parameters plus a StepLR and steps it per epoch; the script trains
once with validation, then retrains a fresh net on train+valid and writes a Kaggle submission of class
probabilities.
Bug: the submission probabilities come from softmax over dim=0 of the (batch, 120) logits, so each class column is
normalised across the images of the batch instead of each image across its 120 breeds.
Thread: https://github.com/d2l-ai/d2l-en/pull/2274
"""
import os

import torch
import torchvision
from d2l import torch as d2l
from torch import nn

data_dir = os.path.join('..', 'data', 'dog-breed-identification')
batch_size = 128

tf_train = torchvision.transforms.Compose([
    torchvision.transforms.RandomResizedCrop(224, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0)),
    torchvision.transforms.RandomHorizontalFlip(),
    torchvision.transforms.ToTensor(),
    torchvision.transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
tf_test = torchvision.transforms.Compose([
    torchvision.transforms.Resize(256),
    torchvision.transforms.CenterCrop(224),
    torchvision.transforms.ToTensor(),
    torchvision.transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])

tr_ds, trva_ds = [torchvision.datasets.ImageFolder(os.path.join(data_dir, 'train_valid_test', part), transform=tf_train)
                  for part in ['train', 'train_valid']]
va_ds, te_ds = [torchvision.datasets.ImageFolder(os.path.join(data_dir, 'train_valid_test', part), transform=tf_test)
                for part in ['valid', 'test']]
tr_iter, trva_iter = [torch.utils.data.DataLoader(d, batch_size, shuffle=True, drop_last=True) for d in (tr_ds, trva_ds)]
va_iter = torch.utils.data.DataLoader(va_ds, batch_size, shuffle=False, drop_last=True)
te_iter = torch.utils.data.DataLoader(te_ds, batch_size, shuffle=False, drop_last=False)


def get_net(devices):
    model = nn.Sequential()
    model.features = torchvision.models.resnet34(pretrained=True)
    model.output_new = nn.Sequential(nn.Linear(1000, 256), nn.ReLU(), nn.Linear(256, 120))
    model = model.to(devices[0])
    for w in model.features.parameters():
        w.requires_grad = False
    return model


ce = nn.CrossEntropyLoss(reduction='none')


def evaluate_loss(data_iter, net, devices):
    total, count = 0.0, 0
    for xb, yb in data_iter:
        xb, yb = xb.to(devices[0]), yb.to(devices[0])
        total += ce(net(xb), yb).sum()
        count += yb.numel()
    return total / count


def train(net, train_iter, valid_iter, num_epochs, lr, wd, devices, lr_period, lr_decay):
    net = nn.DataParallel(net, device_ids=devices).to(devices[0])
    opt = torch.optim.SGD((w for w in net.parameters() if w.requires_grad), lr=lr, momentum=0.9, weight_decay=wd)
    sched = torch.optim.lr_scheduler.StepLR(opt, lr_period, lr_decay)
    acc = None
    for ep in range(num_epochs):
        acc = d2l.Accumulator(2)
        for xb, yb in train_iter:
            xb, yb = xb.to(devices[0]), yb.to(devices[0])
            opt.zero_grad()
            batch_loss = ce(net(xb), yb).sum()
            batch_loss.backward()
            opt.step()
            acc.add(batch_loss, yb.shape[0])
        msg = f'epoch {ep + 1} train loss {acc[0] / acc[1]:.3f}'
        if valid_iter is not None:
            msg += f', valid loss {evaluate_loss(valid_iter, net, devices):.3f}'
        print(msg)
        sched.step()


devices, num_epochs, lr, wd = d2l.try_all_gpus(), 5, 1e-4, 1e-4
lr_period, lr_decay, net = 2, 0.9, get_net(devices)
train(net, tr_iter, va_iter, num_epochs, lr, wd, devices, lr_period, lr_decay)

net = get_net(devices)
train(net, trva_iter, None, num_epochs, lr, wd, devices, lr_period, lr_decay)

probs = []
for xb, _ in te_iter:
    p = torch.nn.functional.softmax(net(xb.to(devices[0])), dim=0)
    probs.extend(p.cpu().detach().numpy())
names = sorted(os.listdir(os.path.join(data_dir, 'train_valid_test', 'test', 'unknown')))
with open('submission.csv', 'w') as fh:
    fh.write('id,' + ','.join(trva_ds.classes) + '\n')
    for name, row in zip(names, probs):
        fh.write(name.split('.')[0] + ',' + ','.join(str(v) for v in row) + '\n')
