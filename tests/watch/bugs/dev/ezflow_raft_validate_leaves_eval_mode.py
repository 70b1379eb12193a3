"""An optical-flow Trainer class in the style of a RAFT training library: a recurrent refinement
model (instance-norm feature encoder, BatchNorm context encoder, a conv update block applied a few
times) that returns the list of every iteration's flow in training mode and only the final flow in
eval mode, a SequenceLoss that weights the predictions by gamma ** (n - i - 1), Adam, and a
_validate_model() helper run every VAL_INTERVAL epochs. _validate_model() calls model.eval() and
never switches back, so from the first validation on the model trains in eval mode: the context
BatchNorm stops using batch statistics and, because the eval forward returns a single tensor,
SequenceLoss iterates over the batch dimension and compares each sample's flow with every label.

Thread: https://github.com/neu-vi/ezflow/pull/57
"""
from copy import deepcopy

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Encoder(nn.Module):
    def __init__(self, out_dim, norm):
        super().__init__()
        Norm = nn.BatchNorm2d if norm == "batch" else nn.InstanceNorm2d
        self.net = nn.Sequential(nn.Conv2d(3, 32, 3, stride=2, padding=1), Norm(32), nn.ReLU(),
                                 nn.Conv2d(32, out_dim, 3, padding=1), Norm(out_dim), nn.ReLU(),
                                 nn.Conv2d(out_dim, out_dim, 1))

    def forward(self, x):
        return self.net(x)


class UpdateBlock(nn.Module):
    def __init__(self, hidden, ctx, feat):
        super().__init__()
        self.gru = nn.Conv2d(hidden + ctx + 2 * feat + 2, 2 * hidden, 3, padding=1)
        self.flow_head = nn.Sequential(nn.Conv2d(hidden, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 2, 3, padding=1))

    def forward(self, net, inp, f1, f2, flow):
        z, q = torch.sigmoid(self.gru(torch.cat([net, inp, f1, f2, flow], 1))).chunk(2, 1)
        net = (1 - z) * net + z * torch.tanh(q)
        return net, self.flow_head(net)


class RAFT(nn.Module):
    def __init__(self, hidden=32, ctx=32, feat=32, update_iters=4):
        super().__init__()
        self.hidden, self.ctx, self.update_iters = hidden, ctx, update_iters
        self.fnet = Encoder(feat, "instance")
        self.cnet = Encoder(hidden + ctx, "batch")
        self.update_block = UpdateBlock(hidden, ctx, feat)

    def forward(self, img1, img2):
        img1, img2 = 2 * (img1 / 255.0) - 1.0, 2 * (img2 / 255.0) - 1.0
        fmap1, fmap2 = self.fnet(img1), self.fnet(img2)
        net, inp = torch.split(self.cnet(img1), [self.hidden, self.ctx], dim=1)
        net, inp = torch.tanh(net), torch.relu(inp)
        flow = torch.zeros(img1.size(0), 2, fmap1.size(2), fmap1.size(3))
        flow_predictions = []
        for _ in range(self.update_iters):
            flow = flow.detach()
            net, delta = self.update_block(net, inp, fmap1, fmap2, flow)
            flow = flow + delta
            flow_up = 2 * F.interpolate(flow, scale_factor=2, mode="bilinear", align_corners=True)
            flow_predictions.append(flow_up)
        if not self.training:
            return flow_up
        return flow_predictions


class SequenceLoss(nn.Module):
    def __init__(self, gamma=0.8, max_flow=400):
        super().__init__()
        self.gamma, self.max_flow = gamma, max_flow

    def forward(self, pred, label):
        n_preds = len(pred)
        flow_loss = 0.0
        mag = torch.sqrt(torch.sum(label ** 2, dim=1))
        valid = (label[:, 0].abs() < 1000) & (label[:, 1].abs() < 1000) & (mag < self.max_flow)
        for i in range(n_preds):
            i_weight = self.gamma ** (n_preds - i - 1)
            flow_loss += i_weight * torch.mean(valid[:, None] * torch.abs(pred[i] - label))
        return flow_loss


def endpointerror(pred, target):
    if isinstance(pred, (list, tuple)):
        pred = pred[-1]
    return torch.norm(pred - target, p=2, dim=1).mean()


class ShiftedPairs(Dataset):
    """Pairs of smooth textures where the second frame is the first one translated by a random shift."""

    def __init__(self, n, seed, size=16):
        g = torch.Generator().manual_seed(seed)
        base = F.interpolate(torch.rand(n, 3, size // 4, size // 4, generator=g), size=(size, size),
                             mode="bilinear", align_corners=False)
        base = base + 0.15 * torch.rand(n, 3, size, size, generator=g)
        shifts = torch.randint(-2, 3, (n, 2), generator=g)
        self.img1 = 255 * base.clamp(0, 1)
        self.img2 = torch.stack([torch.roll(im, shifts=(int(s[1]), int(s[0])), dims=(1, 2))
                                 for im, s in zip(self.img1, shifts)])
        self.flow = shifts.float()[:, :, None, None].expand(n, 2, size, size).clone()

    def __len__(self):
        return len(self.flow)

    def __getitem__(self, i):
        return (self.img1[i], self.img2[i]), self.flow[i]


class Trainer:
    def __init__(self, cfg, model, train_loader, val_loader):
        self.cfg = cfg
        self.model = model
        self.train_loader = train_loader
        self.val_loader = val_loader

    def _calculate_metric(self, pred, target):
        return endpointerror(pred, target)

    def _train_model(self, n_epochs, loss_fn, optimizer, scheduler):
        best_model = deepcopy(self.model)
        model = self.model
        model.train()
        min_avg_metric = float("inf")
        for epochs in range(n_epochs):
            epoch_loss = 0.0
            for iteration, (inp, target) in enumerate(self.train_loader):
                img1, img2 = inp
                pred = model(img1, img2)
                loss = loss_fn(pred, target)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()
                epoch_loss += loss.item()
            print(f"Epoch {epochs + 1}: Training loss = {epoch_loss / len(self.train_loader):.4f}")
            if epochs % self.cfg["VAL_INTERVAL"] == 0:
                new_avg_metric = self._validate_model(model)
                if new_avg_metric < min_avg_metric:
                    best_model = deepcopy(model)
                    min_avg_metric = new_avg_metric
                print(f"Epoch {epochs + 1}: Average validation metric = {new_avg_metric:.4f}")
        return best_model

    def _validate_model(self, model):
        model.eval()
        total, count = 0.0, 0
        with torch.no_grad():
            for inp, target in self.val_loader:
                img1, img2 = inp
                pred = model(img1, img2)
                total += self._calculate_metric(pred, target).item()
                count += 1
        return total / count

    def train(self, n_epochs=None):
        loss_fn = SequenceLoss(**self.cfg["CRITERION_PARAMS"])
        optimizer = torch.optim.Adam(self.model.parameters(), **self.cfg["OPTIMIZER_PARAMS"])
        scheduler = None
        best = self._train_model(n_epochs or self.cfg["EPOCHS"], loss_fn, optimizer, scheduler)
        print("Training complete!")
        return best


def main():
    torch.manual_seed(0)
    cfg = {"EPOCHS": 6, "VAL_INTERVAL": 2, "CRITERION_PARAMS": {"gamma": 0.8, "max_flow": 400},
           "OPTIMIZER_PARAMS": {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8}}
    train_loader = DataLoader(ShiftedPairs(192, seed=0), batch_size=16, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    val_loader = DataLoader(ShiftedPairs(64, seed=1), batch_size=16)
    Trainer(cfg, RAFT(), train_loader, val_loader).train()


if __name__ == "__main__":
    main()
