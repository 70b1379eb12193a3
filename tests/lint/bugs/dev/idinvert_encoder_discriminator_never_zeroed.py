"""
Shape: one long training_loop(config, ...) function; encoder E and discriminator D wrapped in model objects (.net), two Adam optimizers plus ExponentialLR schedulers, D update then E update inside the batch loop.
Bug: optimizer_E.zero_grad() is called before the encoder backward, but optimizer_D is never zeroed, so D's gradients keep accumulating (including those leaking in from the encoder's adversarial loss).
Thread: https://github.com/Hsintien-Ng/idinvert_pytorch-reproduced/issues/1
"""
import torch
import torch.nn.functional as F
from torch import autograd
from torch.utils import data as tud

from datasets import celebahq
from models import stylegan_generator, stylegan_encoder, stylegan_discriminator
from models.perceptual_model import PerceptualModel as VGGFeatures


def r1_penalty(D, real_x):
    x_in = real_x.requires_grad_(True)
    scores = D.net(x_in)
    grads = autograd.grad(outputs=scores, inputs=x_in, grad_outputs=torch.ones_like(scores),
                          create_graph=True, retain_graph=True, only_inputs=True)[0]
    return (grads * grads).sum(dim=[1, 2, 3]).mean()


def adv_loss(scores, real=True):
    return torch.mean(F.softplus(-scores)) if real else torch.mean(F.softplus(scores))


def training_loop(config, dataset_args, E_lr_args, D_lr_args, opt_args, E_loss_args, D_loss_args,
                  logger=None, max_epoch=50):
    train_loader = tud.DataLoader(celebahq.CelebaHQ(dataset_args, train=True),
                              batch_size=config.train_batch_size, shuffle=True)

    name, gpus = config.model_name, config.gpu_ids
    G = stylegan_generator.StyleGANGenerator(name, logger, gpu_ids=gpus)
    E = stylegan_encoder.StyleGANEncoder(name, logger, gpu_ids=gpus)
    P = VGGFeatures(min_val=G.min_val, max_val=G.max_val, gpu_ids=gpus)
    D = stylegan_discriminator.StyleGANDiscriminator(name, logger, gpu_ids=gpus)
    G.net.synthesis.eval()
    E.net.train()
    P.net.eval()
    D.net.train()
    latent_shape = [G.num_layers, G.w_space_dim]

    optimizer_E = torch.optim.Adam(E.net.parameters(), lr=E_lr_args.learning_rate, **opt_args)
    optimizer_D = torch.optim.Adam(D.net.parameters(), lr=D_lr_args.learning_rate, **opt_args)
    sched_E = torch.optim.lr_scheduler.ExponentialLR(optimizer=optimizer_E, gamma=E_lr_args.decay_rate)
    sched_D = torch.optim.lr_scheduler.ExponentialLR(optimizer=optimizer_D, gamma=D_lr_args.decay_rate)

    global_step = 0
    for epoch in range(max_epoch):
        for step, batch in enumerate(train_loader):
            E.net.train()
            x = batch.float().cuda()
            n = x.shape[0]
            w = E.net(x).view(n, *latent_shape)
            x_rec = G.net.synthesis(w)

            # discriminator update
            real_scores = D.net(x)
            fake_scores = D.net(x_rec.detach())
            d_real = adv_loss(real_scores, real=True)
            d_fake = adv_loss(fake_scores, real=False)
            d_gp = r1_penalty(D, x)
            D_loss = (D_loss_args.loss_real_weight * d_real + D_loss_args.loss_fake_weight * d_fake
                      + D_loss_args.loss_gp_weight * d_gp)
            D_loss.backward()
            optimizer_D.step()

            # encoder update
            pix = torch.mean((x - x_rec) ** 2)
            feat = 0.0
            if E_loss_args.loss_feat_weight:
                feat = torch.mean((P.net(x) - P.net(x_rec)) ** 2)
            adv = 0.0
            if E_loss_args.loss_adv_weight:
                adv = adv_loss(D.net(x_rec), real=True)
            E_loss = (E_loss_args.loss_pix_weight * pix + E_loss_args.loss_feat_weight * feat
                      + E_loss_args.loss_adv_weight * adv)
            optimizer_E.zero_grad()
            E_loss.backward()
            optimizer_E.step()

            global_step += 1
            if (1 + global_step) % E_lr_args.decay_step == 0:
                sched_E.step()
            if (1 + global_step) % D_lr_args.decay_step == 0:
                sched_D.step()

        torch.save(E.net.module.state_dict(), "encoder_epoch_{:03d}".format(epoch))
