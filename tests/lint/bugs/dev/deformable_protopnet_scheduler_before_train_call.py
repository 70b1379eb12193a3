"""
Shape: module-level script; several Adam optimizers over param-group dicts, StepLR on the joint one; per-epoch phase branches call tnt.train(model=..., optimizer=...) from an imported train_and_test module (optimizer.step() lives there, not in this file).
Bug: joint_sched.step() (and warm_sched.step()) is called before the tnt.train(...) call that steps the optimizer in the same epoch.
Thread: https://github.com/jdonnelly36/Deformable-ProtoPNet/issues/6
"""
import torch
import torch.utils.data
import torchvision.datasets as datasets
import torchvision.transforms as transforms

import model
import train_and_test as tnt
from settings import (TRAIN_DIR, TEST_DIR, IMG, base_architecture, prototype_shape,
                      train_batch_size, test_batch_size, joint_lrs, joint_step,
                      warm_lrs, pre_offset_lrs, last_lr,
                      coefs, warm_eps, total_eps, warm2_eps,
                      first_push, push_at, mean, std)

freeze_last = True
sub_margin = True
log = print

norm = transforms.Normalize(mean=mean, std=std)
train_set = datasets.ImageFolder(TRAIN_DIR, transforms.Compose([
    transforms.RandomHorizontalFlip(),
    transforms.Resize(size=(IMG, IMG)),
    transforms.ToTensor(),
    norm]))
tr_dl = torch.utils.data.DataLoader(train_set, batch_size=train_batch_size, shuffle=True,
                                           num_workers=4, pin_memory=False)
test_set = datasets.ImageFolder(TEST_DIR, transforms.Compose([
    transforms.Resize(size=(IMG, IMG)), transforms.ToTensor(), norm]))
te_dl = torch.utils.data.DataLoader(test_set, batch_size=test_batch_size, shuffle=False,
                                          num_workers=4, pin_memory=False)

n_classes = 120 if 'stanford_dogs' in TRAIN_DIR else 200
net = model.construct_PPNet(base_architecture=base_architecture, pretrained=True, img_size=IMG,
                            prototype_shape=prototype_shape, num_classes=n_classes)
net = net.cuda()
net_multi = torch.nn.DataParallel(net)

joint_groups = [
    {'params': net.features.parameters(), 'lr': joint_lrs['features'], 'weight_decay': 1e-3},
    {'params': net.add_on_layers.parameters(), 'lr': joint_lrs['add_on_layers'], 'weight_decay': 1e-3},
    {'params': net.prototype_vectors, 'lr': joint_lrs['prototype_vectors']},
    {'params': net.conv_offset.parameters(), 'lr': joint_lrs['conv_offset']},
    {'params': net.last_layer.parameters(), 'lr': joint_lrs['joint_last_layer_lr']},
]
joint_opt = torch.optim.Adam(joint_groups)
joint_sched = torch.optim.lr_scheduler.StepLR(joint_opt, step_size=joint_step, gamma=0.2)

warm_opt = torch.optim.Adam([
    {'params': net.add_on_layers.parameters(), 'lr': warm_lrs['add_on_layers'], 'weight_decay': 1e-3},
    {'params': net.prototype_vectors, 'lr': warm_lrs['prototype_vectors']},
])
pre_offset_opt = torch.optim.Adam([
    {'params': net.add_on_layers.parameters(), 'lr': pre_offset_lrs['add_on_layers'], 'weight_decay': 1e-3},
    {'params': net.prototype_vectors, 'lr': pre_offset_lrs['prototype_vectors']},
    {'params': net.features.parameters(), 'lr': pre_offset_lrs['features'], 'weight_decay': 1e-3},
])
warm_sched = None
if 'stanford_dogs' in TRAIN_DIR:
    warm_sched = torch.optim.lr_scheduler.StepLR(joint_opt, step_size=5, gamma=0.1)
last_opt = torch.optim.Adam([{'params': net.last_layer.parameters(), 'lr': last_lr}])

for ep in range(total_eps):
    if ep < warm_eps:
        tnt.warm_only(model=net_multi, log=log, last_layer_fixed=freeze_last)
        _ = tnt.train(model=net_multi, dataloader=tr_dl, optimizer=warm_opt,
                      class_specific=True, coefs=coefs, log=log, subtractive_margin=sub_margin,
                      use_ortho_loss=False)
    elif ep >= warm_eps and ep - warm_eps < warm2_eps:
        tnt.warm_pre_offset(model=net_multi, log=log, last_layer_fixed=freeze_last)
        if 'stanford_dogs' in TRAIN_DIR:
            warm_sched.step()
        _ = tnt.train(model=net_multi, dataloader=tr_dl, optimizer=pre_offset_opt,
                      class_specific=True, coefs=coefs, log=log, subtractive_margin=sub_margin,
                      use_ortho_loss=False)
    else:
        if ep == warm_eps + warm2_eps:
            net_multi.module.initialize_offset_weights()
        tnt.joint(model=net_multi, log=log, last_layer_fixed=freeze_last)
        joint_sched.step()
        _ = tnt.train(model=net_multi, dataloader=tr_dl, optimizer=joint_opt,
                      class_specific=True, coefs=coefs, log=log, subtractive_margin=sub_margin,
                      use_ortho_loss=True)

    acc = tnt.test(model=net_multi, dataloader=te_dl, class_specific=True, log=log,
                   subtractive_margin=sub_margin)

    if (ep == first_push and first_push < 20) or (ep >= first_push and ep in push_at):
        if not freeze_last:
            tnt.last_only(model=net_multi, log=log, last_layer_fixed=freeze_last)
            for it in range(20):
                _ = tnt.train(model=net_multi, dataloader=tr_dl, optimizer=last_opt,
                              class_specific=True, coefs=coefs, log=log,
                              subtractive_margin=sub_margin)
                acc = tnt.test(model=net_multi, dataloader=te_dl, class_specific=True, log=log)
