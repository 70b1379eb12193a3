"""
Shape: one train(prepared_train_labels, images_folder, num_refinement_stages, base_lr, batch_size, batches_per_iter, ...) function for a lightweight OpenPose-style network: CocoTrainDataset with a Compose of keypoint transforms, a shuffled DataLoader, Adam over many per-layer param groups (conv / depthwise / bn weights and biases with their own lr and weight decay), a MultiStepLR with epoch milestones, optional resume of optimizer/scheduler/iteration from a checkpoint, DataParallel(net).cuda(), then an epoch loop with a hand-rolled gradient accumulation counter (zero_grad on the first batch of a group, optimizer.step() on the last), per-stage L2 heatmap/PAF losses, periodic logging, checkpointing and an evaluate(...) call followed by net.train().
Bug: scheduler.step() is the first statement of every epoch, before that epoch's optimizer.step() calls, so the MultiStepLR runs one epoch ahead and PyTorch warns that the first value of the schedule is skipped.
Thread: https://github.com/Daniil-Osokin/lightweight-human-pose-estimation.pytorch/issues/177
"""
import torch
import torch.optim as optim
from torch.nn import DataParallel
from torch.utils.data import DataLoader
from torchvision import transforms

from datasets.coco import CocoTrainDataset
from datasets.transformations import ConvertKeypoints, CropPad, Flip, Rotate, Scale
from models.with_mobilenet import PoseEstimationWithMobileNet
from modules.get_parameters import get_parameters_bn, get_parameters_conv, get_parameters_conv_depthwise
from modules.load_state import load_from_mobilenet, load_state
from modules.loss import l2_loss
from val import evaluate


def train(prepared_train_labels, images_folder, num_refinement_stages, base_lr, batch_size, batches_per_iter,
          num_workers, checkpoint_path, weights_only, from_mobilenet, checkpoints_folder, log_after,
          val_labels, val_images_folder, val_output_name, checkpoint_after, val_after):
    net = PoseEstimationWithMobileNet(num_refinement_stages)
    dataset = CocoTrainDataset(prepared_train_labels, images_folder, 8, 7, 1,
                               transform=transforms.Compose([ConvertKeypoints(), Scale(),
                                                             Rotate(pad=(128, 128, 128)),
                                                             CropPad(pad=(128, 128, 128)), Flip()]))
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers)

    optimizer = optim.Adam([
        {'params': get_parameters_conv(net.model, 'weight')},
        {'params': get_parameters_conv_depthwise(net.model, 'weight'), 'weight_decay': 0},
        {'params': get_parameters_bn(net.model, 'weight'), 'weight_decay': 0},
        {'params': get_parameters_bn(net.model, 'bias'), 'lr': base_lr * 2, 'weight_decay': 0},
        {'params': get_parameters_conv(net.cpm, 'weight'), 'lr': base_lr},
        {'params': get_parameters_conv(net.cpm, 'bias'), 'lr': base_lr * 2, 'weight_decay': 0},
        {'params': get_parameters_conv(net.initial_stage, 'weight'), 'lr': base_lr},
        {'params': get_parameters_conv(net.initial_stage, 'bias'), 'lr': base_lr * 2, 'weight_decay': 0},
        {'params': get_parameters_conv(net.refinement_stages, 'weight'), 'lr': base_lr * 4},
        {'params': get_parameters_conv(net.refinement_stages, 'bias'), 'lr': base_lr * 8, 'weight_decay': 0},
    ], lr=base_lr, weight_decay=5e-4)

    n_iter = 0
    start_epoch = 0
    scheduler = optim.lr_scheduler.MultiStepLR(optimizer, milestones=[100, 200, 260], gamma=0.333)
    if checkpoint_path:
        ckpt = torch.load(checkpoint_path)
        if from_mobilenet:
            load_from_mobilenet(net, ckpt)
        else:
            load_state(net, ckpt)
            if not weights_only:
                optimizer.load_state_dict(ckpt['optimizer'])
                scheduler.load_state_dict(ckpt['scheduler'])
                n_iter = ckpt['iter']
                start_epoch = ckpt['current_epoch']

    net = DataParallel(net).cuda()
    net.train()
    for epoch in range(start_epoch, 280):
        scheduler.step()
        running = [0, 0] * (num_refinement_stages + 1)
        acc_idx = 0
        for batch in loader:
            if acc_idx == 0:
                optimizer.zero_grad()
            images = batch['image'].cuda()
            kp_masks, paf_masks = batch['keypoint_mask'].cuda(), batch['paf_mask'].cuda()
            kp_maps, paf_maps = batch['keypoint_maps'].cuda(), batch['paf_maps'].cuda()

            outputs = net(images)
            stage_losses = []
            for s in range(len(running) // 2):
                stage_losses.append(l2_loss(outputs[s * 2], kp_maps, kp_masks, images.shape[0]))
                stage_losses.append(l2_loss(outputs[s * 2 + 1], paf_maps, paf_masks, images.shape[0]))
                running[s * 2] += stage_losses[-2].item() / batches_per_iter
                running[s * 2 + 1] += stage_losses[-1].item() / batches_per_iter

            loss = sum(stage_losses) / batches_per_iter
            loss.backward()
            acc_idx += 1
            if acc_idx == batches_per_iter:
                optimizer.step()
                acc_idx = 0
                n_iter += 1
            else:
                continue

            if n_iter % log_after == 0:
                print('Iter: {} losses: {}'.format(n_iter, [r / log_after for r in running]))
                running = [0] * len(running)
            if n_iter % checkpoint_after == 0:
                torch.save({'state_dict': net.module.state_dict(), 'optimizer': optimizer.state_dict(),
                            'scheduler': scheduler.state_dict(), 'iter': n_iter, 'current_epoch': epoch},
                           '{}/checkpoint_iter_{}.pth.tar'.format(checkpoints_folder, n_iter))
            if n_iter % val_after == 0:
                evaluate(val_labels, val_output_name, val_images_folder, net)
                net.train()
