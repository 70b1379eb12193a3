"""
Shape: cage-deformation project split into common.deform_with_MVC (mean-value coordinates of the source points w.r.t. the predicted cage, then a weighted sum of the deformed cage), NetworkFull (PointNet encoder, cage decoder, merger, deformation decoder) returning a dict with cage/new_cage/deformed/weight, an AllLosses module summing named terms into a defaultdict (chamfer, gravity, and an MVCRegularizer 'WREG' term on outputs['weight']), and a train() function stacking the terms, backward, gradient clamping and Adam step.
Bug: deform_with_MVC detaches the MVC weights right after computing them, so the 'WREG' regulariser built on outputs['weight'] has no path to any parameter and has no effect whatever its weight.
Thread: https://github.com/yifita/deep_cage/issues/16
"""
from collections import defaultdict

import numpy as np
import torch
from torch import nn

from networks_util import Conv1d, Linear, MLPDeformer, PointNetfeat, mean_value_coordinates_3D
from losses_util import LabeledChamferDistance
from common import build_dataset, clamp_gradient, crisscross_input, loadInitCage
from option import opt


def deform_with_MVC(cage, cage_deformed, cage_face, query, verbose=False):
    weights, weights_unnormed = mean_value_coordinates_3D(query, cage, cage_face, verbose=True)
    weights = weights.detach()
    deformed = torch.sum(weights.unsqueeze(-1) * cage_deformed.unsqueeze(1), dim=2)
    if verbose:
        return deformed, weights, weights_unnormed
    return deformed


class NetworkFull(nn.Module):
    def __init__(self, opt, dim, bottleneck_size, template_vertices, template_faces):
        super().__init__()
        self.opt = opt
        self.dim = dim
        self.register_buffer("template_faces", template_faces)
        self.template_vertices = nn.Parameter(template_vertices, requires_grad=opt.optimize_template)
        self.encoder = nn.Sequential(
            PointNetfeat(dim=dim, num_points=opt.num_point, bottleneck_size=bottleneck_size),
            Linear(bottleneck_size, bottleneck_size, activation="lrelu"),
        )
        self.nc_decoder = MLPDeformer(dim=dim, bottleneck_size=bottleneck_size, npoint=template_vertices.shape[-1])
        self.merger = nn.Sequential(Conv1d(bottleneck_size * 2, bottleneck_size * 2, 1, activation="lrelu"))
        self.nd_decoder = MLPDeformer(dim=dim, bottleneck_size=bottleneck_size * 2, npoint=template_vertices.shape[-1])

    def forward(self, source_shape, target_shape, alpha=1.0):
        B = source_shape.shape[0]
        code = self.encoder(torch.cat([source_shape, target_shape], dim=0)).unsqueeze(-1)
        s_code, t_code = torch.split(code, B, dim=0)
        cage = self.template_vertices.view(1, self.dim, -1).expand(B, -1, -1)
        cage = self.nc_decoder(s_code, cage)
        new_cage = self.nd_decoder(self.merger(torch.cat([s_code, t_code], dim=1)), cage)
        cage = cage.transpose(1, 2).contiguous()
        new_cage = new_cage.transpose(1, 2).contiguous()
        deformed, weights, weights_unnormed = deform_with_MVC(
            cage, new_cage, self.template_faces.expand(B, -1, -1), source_shape.transpose(1, 2).contiguous(), verbose=True)
        return {"cage": cage, "new_cage": new_cage, "deformed": deformed, "cage_face": self.template_faces,
                "weight": weights, "weight_unnormed": weights_unnormed}


class MVCRegularizer(nn.Module):
    def __init__(self, alpha=1.0, beta=1.0, threshold=5.0):
        super().__init__()
        self.alpha = alpha
        self.beta = beta
        self.threshold = threshold

    def forward(self, weights):
        total = 0
        if self.alpha > 0:
            total += torch.mean(torch.log(torch.relu(weights.abs() - self.threshold) + 1)) * self.alpha
        if self.beta > 0:
            total += torch.mean(torch.relu(-weights) ** 2) * self.beta
        return total


class AllLosses(nn.Module):
    def __init__(self, opt):
        super().__init__()
        self.opt = opt
        self.loss = defaultdict(float)
        self.labeled_chamfer_loss = LabeledChamferDistance(beta=opt.beta, gamma=opt.gamma, delta=opt.delta)
        self.mvc_reg_loss = MVCRegularizer(threshold=50, beta=1.0, alpha=0.0)

    def forward(self, all_inputs, all_outputs, progress=1.0):
        self.loss.clear()
        cd, _, _ = self.labeled_chamfer_loss(all_outputs["deformed"], all_inputs["target_shape"])
        self.loss["CD"] = cd * self.opt.loss_weight
        if self.opt.gravity_weight > 0:
            shift = torch.mean(all_outputs["cage"], dim=1) - torch.mean(all_inputs["source_shape"], dim=1)
            self.loss["GRAV"] += torch.mean(nn.functional.softshrink(torch.sum(shift ** 2, dim=-1), lambd=0.1))
            self.loss["GRAV"] *= self.opt.gravity_weight
        if self.opt.mvc_weight > 0:
            self.loss["WREG"] += self.mvc_reg_loss(all_outputs["weight"]) * self.opt.mvc_weight
        return self.loss


def train():
    dataset = build_dataset(opt)
    loader = torch.utils.data.DataLoader(dataset, batch_size=opt.batch_size, shuffle=True, drop_last=True, num_workers=2)
    init_cage_V, init_cage_Fs = loadInitCage([opt.template])
    cage_V_t = init_cage_V.transpose(1, 2).detach().cuda()
    net = NetworkFull(opt, dim=3, bottleneck_size=opt.bottleneck_size, template_vertices=cage_V_t,
                      template_faces=init_cage_Fs[-1]).cuda()
    all_losses = AllLosses(opt)
    optimizer = torch.optim.Adam([
        {"params": net.encoder.parameters()},
        {"params": net.nd_decoder.parameters()},
        {"params": net.merger.parameters()}], lr=opt.lr)
    optimizer.add_param_group({"params": net.nc_decoder.parameters(), "lr": 0.1 * opt.lr})
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, int(opt.nepochs * 0.4), gamma=0.1)
    net.train()
    for epoch in range(opt.nepochs):
        for step, data in enumerate(loader):
            data = crisscross_input(dataset.uncollate(data))
            optimizer.zero_grad()
            outputs = net(data["source_shape"].transpose(1, 2), data["target_shape"].transpose(1, 2), 1.0)
            current = all_losses(data, outputs, step / len(loader) + epoch)
            loss_sum = torch.sum(torch.stack([v for v in current.values()], dim=0))
            loss_sum.backward()
            if epoch < opt.warmup_epochs:
                net.nc_decoder.zero_grad()
                net.encoder.zero_grad()
            clamp_gradient(net, 0.1)
            optimizer.step()
        scheduler.step()


if __name__ == "__main__":
    train()
