"""
Shape: a `Trainer` class drives pytorch-ignite: `__call__` builds a reconstructor (with dropout) and
an optional evaluator/discriminator, each wrapped in DataParallel with its own Adam in
`self.optimizers`, then creates `Engine(lambda e, b: self.update(b))` for training and
`Engine(lambda e, b: self.inference(b))` for validation, run from an EPOCH_COMPLETED handler.
Bug: neither `update` nor `inference` ever switches the networks' mode, so validation runs with
dropout active (models stay in train mode throughout); the fix added `.eval()` at the top of
`inference` and `.train()` at the top of `update`.
Thread: https://github.com/facebookresearch/active-mri-acquisition/pull/18
"""
import torch
import torch.nn.functional as F
import torch.optim as optim
from ignite.engine import Engine, Events
from ignite.metrics import Loss

from data import create_data_loaders
from models.evaluator import EvaluatorNetwork
from models.fft_utils import GANLossKspace, gaussian_nll_loss, preprocess_inputs, to_magnitude
from models.reconstruction import ReconstructorNetwork


def validate_after_epoch(engine, val_engine=None, val_loader=None, trainer=None):
    val_engine.run(data=val_loader)
    score = -val_engine.state.metrics["mse"]
    trainer.epochs_done += 1
    if score > trainer.best_score:
        trainer.best_score = score


class Trainer:
    def __init__(self, opts):
        self.opts = opts
        self.recon_net = None
        self.critic = None
        self.best_score = -float("inf")
        self.epochs_done = 0
        self.n_updates = 0
        gan_loss = GANLossKspace(use_mse_as_energy=opts.use_mse_as_disc_energy, grad_ctx=opts.grad_ctx)
        self.loss_fns = {"GAN": gan_loss.to(opts.device), "NLL": gaussian_nll_loss}

    def inference(self, minibatch):
        with torch.no_grad():
            zero_filled, gt, mask = preprocess_inputs(minibatch, self.opts.dataroot, self.opts.device)
            recon, uncert, mask_emb = self.recon_net(zero_filled, mask)
            recon_score = gt_score = None
            if self.critic is not None:
                recon_score = self.critic(recon, mask_emb)
                gt_score = self.critic(gt, mask_emb)
            return {
                "recon_mag": to_magnitude(recon),
                "gt_mag": to_magnitude(gt),
                "uncertainty": uncert,
                "recon_eval": recon_score,
                "gt_eval": gt_score,
            }

    def update(self, minibatch):
        zero_filled, target, mask = preprocess_inputs(minibatch, self.opts.dataroot, self.opts.device)
        recon, uncert, mask_emb = self.recon_net(zero_filled, mask)

        gan_term = 0
        d_loss = torch.tensor(0.0)
        if self.critic is not None:
            self.optimizers["D"].zero_grad()
            fake_detached = recon.detach()
            d_fake = self.loss_fns["GAN"](self.critic(fake_detached, mask_emb.detach()), False, mask,
                                          degree=0, pred_and_gt=(fake_detached, target))
            d_real = self.loss_fns["GAN"](self.critic(target, mask_emb.detach()), True, mask,
                                          degree=1, pred_and_gt=(fake_detached, target))
            d_loss = d_fake + d_real
            d_loss.backward(retain_graph=True)
            self.optimizers["D"].step()

            gan_term = self.loss_fns["GAN"](self.critic(recon, mask_emb), True, mask, degree=1,
                                            updateG=True, pred_and_gt=(recon, target))
            gan_term = gan_term * self.opts.lambda_gan

        self.optimizers["G"].zero_grad()
        g_loss = self.loss_fns["NLL"](recon, target, uncert, self.opts).mean() + gan_term
        g_loss.backward()
        self.optimizers["G"].step()

        self.n_updates += 1
        return {"loss_D": d_loss.item(), "loss_G": g_loss.item()}

    def __call__(self):
        o = self.opts
        self.recon_net = ReconstructorNetwork(
            number_of_cascade_blocks=o.number_of_cascade_blocks,
            n_downsampling=o.n_downsampling,
            number_of_filters=o.number_of_reconstructor_filters,
            mask_embed_dim=o.mask_embed_dim,
            dropout_probability=o.dropout_probability,
            img_width=o.image_width,
        )
        self.recon_net = torch.nn.DataParallel(self.recon_net).to(o.device)
        self.optimizers = {"G": optim.Adam(self.recon_net.parameters(), lr=o.lr, betas=(o.beta1, 0.999))}

        if o.use_evaluator:
            self.critic = EvaluatorNetwork(number_of_filters=o.number_of_evaluator_filters,
                                           width=o.image_width, mask_embed_dim=o.mask_embed_dim)
            self.critic = torch.nn.DataParallel(self.critic).to(o.device)
            self.optimizers["D"] = optim.Adam(self.critic.parameters(), lr=o.lr, betas=(o.beta1, 0.999))

        train_loader, val_loader = create_data_loaders(o)

        train_engine = Engine(lambda eng, b: self.update(b))
        val_engine = Engine(lambda eng, b: self.inference(b))
        Loss(loss_fn=F.mse_loss, output_transform=lambda r: (r["recon_mag"], r["gt_mag"])).attach(val_engine, "mse")

        train_engine.add_event_handler(Events.EPOCH_COMPLETED, validate_after_epoch,
                                       val_engine=val_engine, val_loader=val_loader, trainer=self)
        train_engine.run(train_loader, o.max_epochs - self.epochs_done)
        return self.best_score
