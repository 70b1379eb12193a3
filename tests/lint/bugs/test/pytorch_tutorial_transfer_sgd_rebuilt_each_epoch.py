"""
Shape: tutorial script: global loaders/sizes dicts; train_model(model, criterion, optim_scheduler, num_epochs) loops epochs and 'train'/'val' phases and, in the train phase, asks the passed-in optim_scheduler(model, epoch) function for its optimizer; optim_scheduler_ft / optim_scheduler_conv compute a decayed lr and return a freshly built optim.SGD(..., momentum=0.9).
Bug: the optimizer is constructed anew every epoch (inside the scheduler helper called from the epoch loop), so SGD's momentum buffers are thrown away each epoch.
Thread: https://github.com/pytorch/tutorials/issues/61
"""
import copy
import os
import time

import torch
import torch.nn as nn
import torch.optim as optim
from torch.autograd import Variable
from torchvision import datasets, models, transforms

ROOT = 'hymenoptera_data'
pipelines = {
    'train': transforms.Compose([transforms.RandomSizedCrop(224), transforms.RandomHorizontalFlip(),
                                 transforms.ToTensor(),
                                 transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]),
    'val': transforms.Compose([transforms.Scale(256), transforms.CenterCrop(224), transforms.ToTensor(),
                               transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]),
}
image_sets = {x: datasets.ImageFolder(os.path.join(ROOT, x), pipelines[x]) for x in ['train', 'val']}
loaders = {x: torch.utils.data.DataLoader(image_sets[x], batch_size=4, shuffle=True, num_workers=4)
                for x in ['train', 'val']}
sizes = {x: len(image_sets[x]) for x in ['train', 'val']}
on_gpu = torch.cuda.is_available()


def train_model(model, criterion, optim_scheduler, num_epochs=25):
    t0 = time.time()
    best_net = model
    top_acc = 0.0
    for epoch in range(num_epochs):
        for split in ['train', 'val']:
            if split == 'train':
                optimizer = optim_scheduler(model, epoch)

            loss_total = 0.0
            n_right = 0
            for inputs, labels in loaders[split]:
                if on_gpu:
                    inputs, labels = Variable(inputs.cuda()), Variable(labels.cuda())
                else:
                    inputs, labels = Variable(inputs), Variable(labels)

                optimizer.zero_grad()
                outputs = model(inputs)
                _, preds = torch.max(outputs.data, 1)
                loss = criterion(outputs, labels)
                if split == 'train':
                    loss.backward()
                    optimizer.step()

                loss_total += loss.data[0]
                n_right += torch.sum(preds == labels.data)

            acc = n_right / sizes[split]
            if split == 'val' and acc > top_acc:
                top_acc = acc
                best_net = copy.deepcopy(model)

    print('took', time.time() - t0, 'best', top_acc)
    return best_net


def optim_scheduler_ft(model, epoch, init_lr=0.001, lr_decay_epoch=7):
    lr = init_lr * (0.1 ** (epoch // lr_decay_epoch))
    if epoch % lr_decay_epoch == 0:
        print('LR is set to {}'.format(lr))
    optimizer = optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    return optimizer


def optim_scheduler_conv(model, epoch, init_lr=0.001, lr_decay_epoch=7):
    lr = init_lr * (0.1 ** (epoch // lr_decay_epoch))
    if epoch % lr_decay_epoch == 0:
        print('LR is set to {}'.format(lr))
    optimizer = optim.SGD(model.fc.parameters(), lr=lr, momentum=0.9)
    return optimizer


finetune_net = models.resnet18(pretrained=True)
finetune_net.fc = nn.Linear(finetune_net.fc.in_features, 2)
if on_gpu:
    finetune_net = finetune_net.cuda()
criterion = nn.CrossEntropyLoss()
finetune_net = train_model(finetune_net, criterion, optim_scheduler_ft, num_epochs=25)

frozen_net = models.resnet18(pretrained=True)
for param in frozen_net.parameters():
    param.requires_grad = False
frozen_net.fc = nn.Linear(frozen_net.fc.in_features, 2)
if on_gpu:
    frozen_net = frozen_net.cuda()
frozen_net = train_model(frozen_net, criterion, optim_scheduler_conv, num_epochs=25)
