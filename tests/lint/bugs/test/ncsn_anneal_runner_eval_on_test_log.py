"""
Shape: runner class `NoiseScoreRunner` with a get_optimizer(parameters) helper that picks Adam/RMSprop/SGD from the config, and a long train() method that builds the CIFAR10/MNIST loaders, wraps the conditional score network in DataParallel, switches it to train mode once before the epoch loop, and every 100 steps draws a batch from a held-out iterator to log the denoising score-matching loss under torch.no_grad().
Bug: the periodic test-loss logging calls score_net.eval() and nothing ever calls score_net.train() again, so after step 100 the rest of training runs with the network in eval mode (normalisation layers stop using batch statistics).
Thread: https://github.com/ermongroup/ncsn/issues/2
"""
import logging
import os

import numpy as np
import tensorboardX
import torch
import torch.optim as optim
import torchvision.transforms as T
from torch.utils.data import DataLoader
from torchvision.datasets import CIFAR10, MNIST

from losses.dsm import anneal_dsm_score_estimation
from models.cond_refinenet_dilated import CondRefineNetDilated


class NoiseScoreRunner:
    def __init__(self, args, config):
        self.args = args
        self.config = config

    def get_optimizer(self, parameters):
        opt_cfg = self.config.optim
        if opt_cfg.optimizer == 'Adam':
            return optim.Adam(parameters, lr=opt_cfg.lr, weight_decay=opt_cfg.weight_decay,
                              betas=(opt_cfg.beta1, 0.999), amsgrad=opt_cfg.amsgrad)
        if opt_cfg.optimizer == 'RMSProp':
            return optim.RMSprop(parameters, lr=opt_cfg.lr, weight_decay=opt_cfg.weight_decay)
        if opt_cfg.optimizer == 'SGD':
            return optim.SGD(parameters, lr=opt_cfg.lr, momentum=0.9)
        raise NotImplementedError(opt_cfg.optimizer)

    def dequantize(self, images):
        return images / 256. * 255. + torch.rand_like(images) / 256.

    def train(self):
        tfm = T.Compose([T.Resize(self.config.data.image_size), T.ToTensor()])
        root = os.path.join(self.args.run, 'datasets')
        if self.config.data.dataset == 'CIFAR10':
            train_set = CIFAR10(os.path.join(root, 'cifar10'), train=True, download=True, transform=tfm)
            held_out = CIFAR10(os.path.join(root, 'cifar10_test'), train=False, download=True, transform=tfm)
        else:
            train_set = MNIST(os.path.join(root, 'mnist'), train=True, download=True, transform=tfm)
            held_out = MNIST(os.path.join(root, 'mnist_test'), train=False, download=True, transform=tfm)

        train_loader = DataLoader(train_set, batch_size=self.config.training.batch_size,
                                  shuffle=True, num_workers=4)
        held_loader = DataLoader(held_out, batch_size=self.config.training.batch_size,
                                 shuffle=True, num_workers=4, drop_last=True)
        held_iter = iter(held_loader)

        writer = tensorboardX.SummaryWriter(log_dir=os.path.join(self.args.run, 'tensorboard', self.args.doc))
        score_net = CondRefineNetDilated(self.config).to(self.config.device)
        score_net = torch.nn.DataParallel(score_net)
        optimizer = self.get_optimizer(score_net.parameters())

        noise_levels = torch.tensor(np.exp(np.linspace(np.log(self.config.model.sigma_begin),
                                                       np.log(self.config.model.sigma_end),
                                                       self.config.model.num_classes))).float().to(self.config.device)

        global_step = 0
        score_net.train()
        for epoch in range(self.config.training.n_epochs):
            for batch_idx, (images, _) in enumerate(train_loader):
                global_step += 1
                images = self.dequantize(images.to(self.config.device))
                level_ids = torch.randint(0, len(noise_levels), (images.shape[0],), device=images.device)
                dsm_loss = anneal_dsm_score_estimation(score_net, images, level_ids, noise_levels,
                                                       self.config.training.anneal_power)

                optimizer.zero_grad()
                dsm_loss.backward()
                optimizer.step()

                writer.add_scalar('loss', dsm_loss, global_step=global_step)
                logging.info("step: %d, loss: %.5f", global_step, dsm_loss.item())

                if global_step >= self.config.training.n_iters:
                    return 0

                if global_step % 100 == 0:
                    score_net.eval()
                    try:
                        held_images, _ = next(held_iter)
                    except StopIteration:
                        held_iter = iter(held_loader)
                        held_images, _ = next(held_iter)
                    held_images = self.dequantize(held_images.to(self.config.device))
                    held_ids = torch.randint(0, len(noise_levels), (held_images.shape[0],),
                                             device=held_images.device)
                    with torch.no_grad():
                        held_loss = anneal_dsm_score_estimation(score_net, held_images, held_ids, noise_levels,
                                                                self.config.training.anneal_power)
                    writer.add_scalar('test_dsm_loss', held_loss, global_step=global_step)

                if global_step % self.config.training.snapshot_freq == 0:
                    torch.save([score_net.state_dict(), optimizer.state_dict()],
                               os.path.join(self.args.log, 'checkpoint_{}.pth'.format(global_step)))
