"""
Shape: nn.Module learned optimizer whose __init__ appends LSTMCells to a plain self.cells list in a loop (with a cuda() override that moves them by hand); main() builds it and hands learned_opt.parameters() to Adam, then runs truncated-BPTT meta-training.
Bug: the LSTM cells live in a Python list, so they are not registered and Adam never receives their weights.
Thread: https://github.com/ikostrikov/pytorch-meta-optimizer/issues/11
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.autograd import Variable

from meta_optimizer import MetaModel
from model import Model


class LearnedOptimizer(nn.Module):

    def __init__(self, model, depth, hsz):
        super(LearnedOptimizer, self).__init__()
        self.shadow = model
        self.hsz = hsz
        self.inp = nn.Linear(2, hsz)

        self.cells = []
        for _ in range(depth):
            self.cells.append(nn.LSTMCell(hsz, hsz))
            self.cells[-1].bias_ih.data.fill_(0)
            self.cells[-1].bias_hh.data.fill_(0)
            self.cells[-1].bias_hh.data[10:20].fill_(1)

        self.outp = nn.Linear(hsz, 1)
        self.outp.weight.data.mul_(0.1)
        self.outp.bias.data.fill_(0.0)

    def cuda(self):
        super(LearnedOptimizer, self).cuda()
        for k in range(len(self.cells)):
            self.cells[k].cuda()

    def reset_lstm(self, keep=False, model=None, use_cuda=False):
        self.shadow.reset()
        self.shadow.copy_params_from(model)
        if keep:
            for k in range(len(self.cells)):
                self.h_state[k] = Variable(self.h_state[k].data)
                self.c_state[k] = Variable(self.c_state[k].data)
        else:
            self.h_state, self.c_state = [], []
            for k in range(len(self.cells)):
                self.h_state.append(Variable(torch.zeros(1, self.hsz)))
                self.c_state.append(Variable(torch.zeros(1, self.hsz)))
                if use_cuda:
                    self.h_state[k], self.c_state[k] = self.h_state[k].cuda(), self.c_state[k].cuda()

    def forward(self, grads):
        shape = grads.size()
        g = grads.view(-1, 1)
        p, eps = 10, 1e-6
        keep = (g.abs() > math.exp(-p)).float()
        a = (g.abs() + eps).log() / p * keep - (1 - keep)
        b = g.sign() * keep + math.exp(p) * g * (1 - keep)
        h = F.tanh(self.inp(torch.cat((a, b), 1)))
        for k in range(len(self.cells)):
            if h.size(0) != self.h_state[k].size(0):
                self.h_state[k] = self.h_state[k].expand(h.size(0), self.h_state[k].size(1))
                self.c_state[k] = self.c_state[k].expand(h.size(0), self.c_state[k].size(1))
            self.h_state[k], self.c_state[k] = self.cells[k](h, (self.h_state[k], self.c_state[k]))
            h = self.h_state[k]
        return self.outp(h).view(*shape)

    def meta_update(self, learner):
        grads = []
        for m in learner.children():
            grads.append(m._parameters['weight'].grad.data.view(-1))
            grads.append(m._parameters['bias'].grad.data.view(-1))
        flat = self.shadow.get_flat_params()
        flat = flat + self(Variable(torch.cat(grads)))
        self.shadow.set_flat_params(flat)
        self.shadow.copy_params_to(learner)
        return self.shadow.model


def main(train_loader, depth=2, hsz=10, max_epoch=10000, updates_per_epoch=10,
         optimizer_steps=100, truncated_bptt_step=20, use_cuda=True):
    seed_net = Model()
    if use_cuda:
        seed_net.cuda()
    learned_opt = LearnedOptimizer(MetaModel(seed_net), depth, hsz)
    if use_cuda:
        learned_opt.cuda()

    optimizer = optim.Adam(learned_opt.parameters(), lr=1e-3)

    for epoch in range(max_epoch):
        batches = iter(train_loader)
        for _ in range(updates_per_epoch):
            learner = Model()
            if use_cuda:
                learner.cuda()
            for chunk in range(optimizer_steps // truncated_bptt_step):
                learned_opt.reset_lstm(keep=chunk > 0, model=learner, use_cuda=use_cuda)
                loss_sum = 0
                for _ in range(truncated_bptt_step):
                    xb, yb = next(batches)
                    if use_cuda:
                        xb, yb = xb.cuda(), yb.cuda()
                    xb, yb = Variable(xb), Variable(yb)
                    loss = F.nll_loss(learner(xb), yb)
                    learner.zero_grad()
                    loss.backward()
                    stepped = learned_opt.meta_update(learner)
                    loss_sum += F.nll_loss(stepped(xb), yb)
                learned_opt.zero_grad()
                loss_sum.backward()
                for p in learned_opt.parameters():
                    p.grad.data.clamp_(-1, 1)
                optimizer.step()
