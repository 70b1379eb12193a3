"""Federated MR reconstruction with cross-site domain alignment (FL-MRCM style). Each site holds
a LocalUpdate_ad_da object built with the site's data loaders, the shared reconstruction
optimizer and a feature-discriminator optimizer. Its train(net, net_fd, epoch, idx, writer)
loops over paired (source, target) batches: the reconstruction net returns (output, z); the
feature discriminator net_fd is first updated on z.detach() / z_t.detach() with BCEWithLogits
against flipped domain codes; then, with net_fd frozen through set_requires_grad, the
adversarial loss of the reconstruction net (net_fd(z), net_fd(z_t) against the true domain
codes) is computed, added to the L1 reconstruction loss, and backpropagated. The server
averages the site state dicts every round (FedAvg).

The bug: to stop GPU memory from growing through the per-batch loss list, the adversarial term
was rewritten as loss_adv_g = loss_adv_g.detach().item() before it is appended and added to
the L1 loss. The total loss is now L1 plus a Python float, so the domain-alignment term is
logged (and even changes) but sends no gradient to the encoder: the latent features of the
two sites are never pulled together and the method degrades to plain federated L1 training.

Thread: https://github.com/guopengf/FL-MRCM/issues/10
"""
import copy
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

SIZE = 16


class SliceDataset(Dataset):
    """Undersampled-input / fully-sampled-target pairs with per-slice normalisation stats."""

    def __init__(self, n, site_shift, seed):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.linspace(-1, 1, SIZE), torch.linspace(-1, 1, SIZE), indexing="ij")
        cx, cy = 0.6 * torch.rand(n, 1, 1, generator=g) - 0.3, 0.6 * torch.rand(n, 1, 1, generator=g) - 0.3
        r = 0.4 + 0.3 * torch.rand(n, 1, 1, generator=g)
        target = (((xx - cx) ** 2 + (yy - cy) ** 2) < r ** 2).float()
        target = target + 0.5 * (((xx + cx) ** 2 + (yy - cy) ** 2) < (0.5 * r) ** 2).float()
        kspace = torch.fft.fft2(target)
        mask = torch.zeros(SIZE, SIZE)
        mask[:, ::3] = 1
        mask[:, SIZE // 2 - 2:SIZE // 2 + 2] = 1
        zero_filled = torch.fft.ifft2(kspace * torch.fft.ifftshift(mask)).abs()
        # site-specific contrast / bias field
        self.input = (zero_filled * (1 + site_shift) + site_shift * xx).unsqueeze(1)
        self.target = target.unsqueeze(1)
        self.mean = self.input.mean(dim=(1, 2, 3))
        self.std = self.input.std(dim=(1, 2, 3))
        self.norm = self.target.amax(dim=(1, 2, 3))

    def __len__(self):
        return len(self.input)

    def __getitem__(self, i):
        return self.input[i], self.target[i], self.mean[i], self.std[i], self.norm[i], "vol", i


class UnetWithLatent(nn.Module):
    def __init__(self, ch=12):
        super().__init__()
        self.enc1 = nn.Sequential(nn.Conv2d(1, ch, 3, padding=1), nn.ReLU())
        self.enc2 = nn.Sequential(nn.Conv2d(ch, 2 * ch, 3, stride=2, padding=1), nn.ReLU())
        self.dec1 = nn.Sequential(nn.ConvTranspose2d(2 * ch, ch, 2, stride=2), nn.ReLU())
        self.out = nn.Conv2d(2 * ch, 1, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        z = self.enc2(e1)
        d1 = self.dec1(z)
        return self.out(torch.cat([d1, e1], 1)), z


class FeatureDiscriminator(nn.Module):
    def __init__(self, ch=24):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(ch, 16, 3, stride=2, padding=1), nn.LeakyReLU(0.2),
                                 nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 2))

    def forward(self, z):
        return self.net(z)


class ScalarWriter:
    def __init__(self):
        self.scalars = {}

    def add_scalar(self, tag, value, step):
        self.scalars.setdefault(tag, []).append((step, value))


class LocalUpdate_ad_da:
    def __init__(self, args, device, dataset, dataset_target, optimizer, optimizer_fd, flag):
        self.args = args
        self.device = device
        self.loss_func = nn.L1Loss()
        self.adv_loss = nn.BCEWithLogitsLoss()
        g = torch.Generator().manual_seed(args.seed)
        self.ldr_train = DataLoader(dataset, batch_size=args.local_bs, shuffle=True, generator=g)
        self.target_domain = DataLoader(dataset_target, batch_size=args.local_bs, shuffle=True, generator=g)
        self.optimizer = optimizer
        self.optimizer_fd = optimizer_fd
        self.flag = flag

    def set_requires_grad(self, nets, requires_grad=False):
        if not isinstance(nets, list):
            nets = [nets]
        for net in nets:
            for param in net.parameters():
                param.requires_grad = requires_grad

    def train(self, net, net_fd, epoch, idx, writer):
        net.train()
        net_fd.train()
        optimizer, optimizer_fd = self.optimizer, self.optimizer_fd
        epoch_loss, epoch_l1, epoch_adv_g, epoch_adv_d = [], [], [], []
        for it in range(self.args.local_ep):
            batch_loss, batch_l1, batch_adv_g, batch_adv_d = [], [], [], []
            for batch_idx, (batch, batch_t) in enumerate(zip(self.ldr_train, self.target_domain)):
                inp, target, mean, std, norm, fname, slc = batch
                inp_t, _, _, _, _, _, _ = batch_t
                net.zero_grad()
                net_fd.zero_grad()
                output, z = net(inp)
                output_t, z_t = net(inp_t)

                src_code = torch.from_numpy(np.repeat(np.array([[1, 0]]), inp.shape[0], axis=0)).float()
                tgt_code = torch.from_numpy(np.repeat(np.array([[0, 1]]), inp_t.shape[0], axis=0)).float()

                # update the feature discriminator
                df_loss = 0
                if not self.flag:
                    self.set_requires_grad(net_fd, True)
                    src_pred = net_fd(z.detach())
                    tgt_pred = net_fd(z_t.detach())
                    df_loss = (self.adv_loss(src_pred, 1 - src_code) + self.adv_loss(tgt_pred, 1 - tgt_code)) / 2
                    df_loss.backward()
                    optimizer_fd.step()
                    df_loss = df_loss.detach().item()
                batch_adv_d.append(df_loss)

                # update the reconstruction network
                self.set_requires_grad(net_fd, False)
                loss_adv_g = 0
                if not self.flag:
                    src_pred = net_fd(z)
                    tgt_pred = net_fd(z_t)
                    loss_adv_g = (self.adv_loss(src_pred, src_code) + self.adv_loss(tgt_pred, tgt_code)) / 2
                    loss_adv_g = loss_adv_g.detach().item()  # keep the history list light
                batch_adv_g.append(loss_adv_g)

                l1 = self.loss_func(output, target)
                batch_l1.append(l1.detach().item())
                loss = l1 + self.args.lambda_adv * loss_adv_g if not self.flag else l1
                batch_loss.append(loss.detach().item())
                loss.backward()
                optimizer.step()
            epoch_loss.append(sum(batch_loss) / len(batch_loss))
            epoch_l1.append(sum(batch_l1) / len(batch_l1))
            epoch_adv_g.append(sum(batch_adv_g) / len(batch_adv_g))
            epoch_adv_d.append(sum(batch_adv_d) / len(batch_adv_d))
        name = self.args.train_datasets[idx]
        writer.add_scalar("TrainLoss/L1/" + name, sum(epoch_l1) / len(epoch_l1), epoch)
        writer.add_scalar("TrainLoss/adv_g/" + name, sum(epoch_adv_g) / len(epoch_adv_g), epoch)
        writer.add_scalar("TrainLoss/adv_d/" + name, sum(epoch_adv_d) / len(epoch_adv_d), epoch)
        return net.state_dict(), sum(epoch_loss) / len(epoch_loss)


def fed_avg(states):
    avg = copy.deepcopy(states[0])
    for k in avg:
        for s in states[1:]:
            avg[k] = avg[k] + s[k]
        avg[k] = avg[k] / len(states)
    return avg


def main():
    torch.manual_seed(0)
    args = SimpleNamespace(local_bs=16, local_ep=1, lr=1e-3, epochs=6, seed=0, lambda_adv=0.1,
                           train_datasets=["siteA", "siteB", "siteC"])
    device = torch.device("cpu")
    sites = [SliceDataset(96, shift, seed=i) for i, shift in enumerate([0.0, 0.4, 0.8])]
    target_site = SliceDataset(96, 1.2, seed=10)  # unlabeled target domain
    net_glob = UnetWithLatent()
    writer = ScalarWriter()
    site_fd = [FeatureDiscriminator() for _ in sites]
    site_fd_opt = [torch.optim.Adam(fd.parameters(), lr=args.lr) for fd in site_fd]
    for epoch in range(args.epochs):
        states, losses = [], []
        for idx, ds in enumerate(sites):
            net = copy.deepcopy(net_glob)
            optimizer = torch.optim.RMSprop(net.parameters(), lr=args.lr)
            local = LocalUpdate_ad_da(args, device, ds, target_site, optimizer, site_fd_opt[idx], flag=False)
            w, loss = local.train(net, site_fd[idx], epoch, idx, writer)
            states.append(w)
            losses.append(loss)
        net_glob.load_state_dict(fed_avg(states))
        adv_g = np.mean([writer.scalars["TrainLoss/adv_g/" + n][-1][1] for n in args.train_datasets])
        print(f"round {epoch}: total {np.mean(losses):.4f}  adv_g {adv_g:.4f}")
    net_glob.eval()
    with torch.no_grad():
        out, _ = net_glob(target_site.input)
        print(f"target-site L1 {F.l1_loss(out, target_site.target).item():.4f}")


if __name__ == "__main__":
    main()
