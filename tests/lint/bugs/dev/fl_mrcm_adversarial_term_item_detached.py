"""
Shape: federated client class ClientAdversarialUpdate(object) with optimizers passed into __init__, L1 + BCEWithLogits adversarial losses as attributes, and a train(net, disc, epoch, idx, tb) method that first updates a feature discriminator, then the reconstruction net on L1 plus an adversarial term.
Bug: the generator-side adversarial loss is turned into a Python float with adv_g.detach().cpu().item() before being added to rec_loss, so that term sends no gradient to the reconstruction network.
Thread: https://github.com/guopengf/FL-MRCM/issues/10
"""
import numpy as np
import torch
from torch import nn
import torch.autograd as autograd
from torch.utils.data import DataLoader


class ClientAdversarialUpdate(object):
    def __init__(self, args, device, dataset, tgt_dataset, opt_rec, opt_disc, no_adapt):
        self.args = args
        self.device = device
        self.rec_crit = nn.L1Loss().to(self.device)
        self.dom_crit = nn.BCEWithLogitsLoss().to(self.device)
        self.src_loader = DataLoader(dataset, batch_size=args.local_bs, shuffle=True, pin_memory=True)
        self.tgt_loader = DataLoader(tgt_dataset, batch_size=args.local_bs, shuffle=True, pin_memory=True)
        self.opt_rec = opt_rec
        self.opt_disc = opt_disc
        self.no_adapt = no_adapt

    def toggle_grad(self, nets, requires_grad=False):
        if not isinstance(nets, list):
            nets = [nets]
        for n in nets:
            if n is not None:
                for p in n.parameters():
                    p.requires_grad = requires_grad

    def train(self, net, disc, epoch, idx, tb):
        net.train()
        disc.train()
        opt_rec = self.opt_rec
        opt_disc = self.opt_disc
        scheduler = torch.optim.lr_scheduler.StepLR(opt_rec, 40, gamma=0.1)

        round_losses = []
        for it in range(self.args.local_ep):
            step_losses = []
            for batch_idx, (batch, batch_tgt) in enumerate(zip(self.src_loader, self.tgt_loader)):
                inp, target = batch[0], batch[1]
                inp_t = batch_tgt[0]
                net.zero_grad()
                disc.zero_grad()
                output, z = net(inp.to(self.device))
                output_t, z_t = net(inp_t.to(self.device))

                src_code = np.repeat(np.array([[1, 0]]), inp.shape[0], axis=0)
                tgt_code = np.repeat(np.array([[0, 1]]), inp_t.shape[0], axis=0)
                src_code = autograd.Variable(torch.FloatTensor(src_code).to(self.device), requires_grad=False)
                tgt_code = autograd.Variable(torch.FloatTensor(tgt_code).to(self.device), requires_grad=False)

                if not self.no_adapt:
                    self.toggle_grad(disc, True)
                    d_src = disc(z.detach())
                    d_tgt = disc(z_t.detach())
                    disc_loss = (self.dom_crit(d_src, 1 - src_code) + self.dom_crit(d_tgt, 1 - tgt_code)) / 2
                    disc_loss.backward()
                    opt_disc.step()

                self.toggle_grad(disc, False)
                adv_g = 0
                if not self.no_adapt:
                    g_src = disc(z)
                    g_tgt = disc(z_t)
                    adv_g = (self.dom_crit(g_src, src_code) + self.dom_crit(g_tgt, tgt_code)) / 2
                    adv_g = adv_g.detach().cpu().item()

                rec_loss = self.rec_crit(output, target.to(self.device))
                if not self.no_adapt:
                    loss = rec_loss + adv_g
                else:
                    loss = rec_loss
                step_losses.append(loss.detach().item())
                loss.backward()
                opt_rec.step()
                scheduler.step(epoch)
            round_losses.append(sum(step_losses) / len(step_losses))
        return net.state_dict(), sum(round_losses) / len(round_losses)
