"""
Shape: PATECTGAN(CTGANSynthesizer) class; train(table, ...) fits a DataTransformer, builds a ctgan Generator and one Discriminator shared by the student and a list of teachers, three kinds of Adam (opt_g, opt_s, a list opt_t), BCELoss, then `while eps < self.eps_budget:` runs teacher updates per partition, n_student_steps student updates on PATE-aggregated teacher votes, and one generator update.
Bug: the student loop calls student_loss.backward() and opt_s.step() without ever calling opt_s.zero_grad(), so student gradients (and generator-pass gradients on the shared discriminator) accumulate across iterations.
Thread: https://github.com/opendp/smartnoise-sdk/issues/280
"""
import numpy as np
import torch
import torch.nn as nn
from torch import optim
from torch.nn import LeakyReLU, Linear, Module, Sequential, Sigmoid

from ctgan import CTGANSynthesizer
from ctgan.conditional import ConditionalGenerator
from ctgan.models import Generator
from ctgan.sampler import Sampler
from ctgan.transformer import DataTransformer

from .privacy_utils import moments_acc, pate, weights_init


class Discriminator(Module):
    def __init__(self, in_dim, hidden, loss_kind, pac):
        super().__init__()
        dim = in_dim * pac
        self.pac = pac
        self.packdim = dim
        layers = []
        for d in list(hidden):
            layers += [Linear(dim, d), LeakyReLU(0.2)]
            dim = d
        layers += [Linear(dim, 1)]
        if loss_kind == 'cross_entropy':
            layers += [Sigmoid()]
        self.seq = Sequential(*layers)

    def forward(self, x):
        return self.seq(x.view(-1, self.packdim))


class PATECTGAN(CTGANSynthesizer):
    def __init__(self, z_dim=128, g_dims=(256, 256), d_dims=(256, 256), g_wd=1e-6,
                 bs=500, eps_budget=1, n_teachers=10, n_teacher_steps=5, n_student_steps=5,
                 loss_kind='cross_entropy', pac=1):
        self.z_dim = z_dim
        self.g_dims = g_dims
        self.d_dims = d_dims
        self.g_wd = g_wd
        self.bs = bs
        self.eps_budget = eps_budget
        self.n_teachers = n_teachers
        self.n_teacher_steps = n_teacher_steps
        self.n_student_steps = n_student_steps
        self.loss_kind = loss_kind
        self.pac = pac
        self.dev = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")

    def train(self, table, discrete_cols=None, ordinal_cols=None):
        self.dt = DataTransformer()
        self.dt.fit(table, discrete_columns=discrete_cols)
        table = self.dt.transform(table)
        shards = np.array_split(table, self.n_teachers)
        self.cond_generator = ConditionalGenerator(table, self.dt.output_info, True)
        shard_conds = [ConditionalGenerator(p, self.dt.output_info, True) for p in shards]

        out_dim = self.dt.output_dimensions
        self.generator = Generator(self.z_dim + self.cond_generator.n_opt, self.g_dims,
                                   out_dim).to(self.dev)
        shared_disc = Discriminator(out_dim + self.cond_generator.n_opt, self.d_dims, self.loss_kind,
                                      self.pac).to(self.dev)
        student = shared_disc
        student.apply(weights_init)
        teachers = [shared_disc for _ in range(self.n_teachers)]

        opt_g = optim.Adam(self.generator.parameters(), lr=2e-4, betas=(0.5, 0.9),
                                weight_decay=self.g_wd)
        opt_s = optim.Adam(student.parameters(), lr=2e-4, betas=(0.5, 0.9))
        opt_t = [optim.Adam(teachers[i].parameters(), lr=2e-4, betas=(0.5, 0.9))
                      for i in range(self.n_teachers)]
        bce = nn.BCELoss()

        sigma = 1e-3
        moments = torch.tensor([0.0 for _ in range(100)])
        orders = 1 + torch.tensor(range(100))
        eps = 0
        z_mean = torch.zeros(self.bs, self.z_dim, device=self.dev)
        z_std = z_mean + 1

        while eps < self.eps_budget:
            for _ in range(self.n_teacher_steps):
                for i in range(self.n_teachers):
                    sampler = Sampler(shards[i], self.dt.output_info)
                    cvec, cmask, col, opt = shard_conds[i].sample(self.bs)
                    cvec = torch.from_numpy(cvec).to(self.dev)
                    z = torch.cat([torch.normal(z_mean, std=z_std), cvec], dim=1)
                    perm = np.random.permutation(self.bs)
                    real = torch.from_numpy(sampler.sample(self.bs, col[perm], opt[perm]).astype('float32')).to(self.dev)
                    fake_cat = torch.cat([self._apply_activate(self.generator(z)), cvec], dim=1)
                    real_cat = torch.cat([real, cvec[perm]], dim=1)

                    opt_t[i].zero_grad()
                    n = int(self.bs / self.pac)
                    err_fake = bce(teachers[i](fake_cat), torch.zeros(n, device=self.dev))
                    err_fake.backward()
                    opt_t[i].step()
                    err_real = bce(teachers[i](real_cat), torch.ones(n, device=self.dev))
                    err_real.backward()
                    opt_t[i].step()

            for _ in range(self.n_student_steps):
                cvec, cmask, col, opt = self.cond_generator.sample(self.bs)
                cvec = torch.from_numpy(cvec).to(self.dev)
                z = torch.cat([torch.normal(z_mean, std=z_std), cvec], dim=1)
                fake_rows = torch.cat([self._apply_activate(self.generator(z)), cvec], dim=1)
                votes_argmax, votes = pate(fake_rows, teachers, sigma)
                s_out = student(fake_rows.detach())
                moments = moments + moments_acc(self.n_teachers, votes, sigma, orders)
                student_loss = bce(s_out, votes_argmax.float().to(self.dev))
                student_loss.backward()
                opt_s.step()

            cvec, cmask, col, opt = self.cond_generator.sample(self.bs)
            cvec = torch.from_numpy(cvec).to(self.dev)
            cmask = torch.from_numpy(cmask).to(self.dev)
            fake = self.generator(torch.cat([torch.normal(mean=z_mean, std=z_std), cvec], dim=1))
            y_fake = student(torch.cat([self._apply_activate(fake), cvec], dim=1))
            label_g = torch.ones(int(self.bs / self.pac), device=self.dev)
            gen_loss = bce(y_fake, label_g) + self._cond_loss(fake, cvec, cmask)
            opt_g.zero_grad()
            gen_loss.backward()
            opt_g.step()

            eps = min((moments - np.log(1e-5)) / orders)
