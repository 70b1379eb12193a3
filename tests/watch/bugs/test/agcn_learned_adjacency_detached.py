"""A-GCN (adaptive-graph ML-GCN) multi-label image classifier. GCNResnet-style model: a CNN
backbone pools each image to a feature vector; the label word embeddings (num_classes x
in_channel) go through a NONLocalBlock1D whose theta / phi 1x1 convolutions produce a learned
label-correlation matrix; an identity is added, the result is normalised by gen_adj_new
(D^-1/2 A D^-1/2), and two GraphConvolution layers turn the label embeddings into per-class
classifiers that are dotted with the image features. get_config_optim() gives the backbone a
smaller learning rate and the non-local block and both graph convolutions the base rate. An
Engine-style learning() loop runs MultiLabelSoftMarginLoss with SGD (momentum, weight decay),
gradient clipping, and per-epoch validation mAP.

The bug: forward ends the adjacency construction with adj = gen_adj_new(adj).detach(). The
graph convolutions and backbone still train, but the detach cuts every path back to the
non-local block, so theta and phi (listed in the optimizer) never receive a gradient: the
"adaptive" label graph stays at its random initialisation for the whole run.

Thread: https://github.com/queenie88/A-GCN/issues/4
"""
import math

import torch
from torch import nn
from torch.nn import Parameter
from torch.utils.data import DataLoader, TensorDataset

NUM_CLASSES, IN_CHANNEL, IMG = 10, 24, 16


class NONLocalBlock1D(nn.Module):
    def __init__(self, in_channels, inter_channels=None):
        super().__init__()
        self.inter_channels = inter_channels or max(in_channels // 2, 1)
        self.theta = nn.Conv1d(in_channels, self.inter_channels, kernel_size=1)
        self.phi = nn.Conv1d(in_channels, self.inter_channels, kernel_size=1)

    def forward(self, x):
        n = x.size(0)
        theta_x = self.theta(x).view(n, self.inter_channels, -1).squeeze(2)
        phi_x = self.phi(x).view(n, self.inter_channels, -1).squeeze(2).transpose(0, 1)
        f = torch.matmul(theta_x, phi_x)
        return f / f.size(-1)


class GraphConvolution(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = Parameter(torch.empty(in_features, out_features))
        stdv = 1.0 / math.sqrt(out_features)
        self.weight.data.uniform_(-stdv, stdv)

    def forward(self, inp, adj):
        return torch.matmul(adj, torch.matmul(inp, self.weight))


def gen_adj_new(a):
    d = torch.diag(torch.pow(a.sum(1).clamp(min=1e-3), -0.5))
    return torch.matmul(d, torch.matmul(a, d))


class GCNResnet(nn.Module):
    def __init__(self, num_classes, in_channel):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU())
        self.pooling = nn.MaxPool2d(IMG // 2, IMG // 2)
        self.num_classes = num_classes
        self.non_local_C1 = NONLocalBlock1D(in_channel)
        self.gc1 = GraphConvolution(in_channel, 48)
        self.gc2 = GraphConvolution(48, 64)
        self.activate = nn.LeakyReLU(0.2)

    def forward(self, feature, inp):
        feature = self.pooling(self.features(feature)).view(feature.size(0), -1)
        inp = inp[0]
        adj = self.non_local_C1(inp.unsqueeze(2))
        adj = adj + torch.eye(self.num_classes)
        adj = gen_adj_new(adj).detach()
        x = self.activate(self.gc1(inp, adj))
        x = self.gc2(x, adj)
        return torch.matmul(feature, x.transpose(0, 1))

    def get_config_optim(self, lr, lrp):
        return [
            {"params": self.features.parameters(), "lr": lr * lrp},
            {"params": self.non_local_C1.parameters(), "lr": lr},
            {"params": self.gc1.parameters(), "lr": lr},
            {"params": self.gc2.parameters(), "lr": lr},
        ]


def average_precision(scores, targets):
    aps = []
    for k in range(scores.shape[1]):
        s, t = scores[:, k], targets[:, k]
        if t.sum() == 0:
            continue
        order = torch.argsort(s, descending=True)
        hits = t[order]
        prec = torch.cumsum(hits, 0) / torch.arange(1, len(hits) + 1)
        aps.append((prec * hits).sum() / hits.sum())
    return torch.stack(aps).mean().item()


class GCNMultiLabelMAPEngine:
    def __init__(self, state):
        self.state = state

    def on_forward(self, training, model, criterion, inputs, target, inp, optimizer=None):
        output = model(inputs, inp)
        loss = criterion(output, target)
        if training:
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), max_norm=10.0)
            optimizer.step()
        return output, loss

    def learning(self, model, criterion, train_dataset, val_dataset, optimizer):
        g = torch.Generator().manual_seed(0)
        train_loader = DataLoader(train_dataset, batch_size=self.state["batch_size"], shuffle=True, generator=g)
        inp = self.state["word_vec"].unsqueeze(0)
        for epoch in range(self.state["max_epochs"]):
            model.train()
            total = 0.0
            for i, (inputs, target) in enumerate(train_loader):
                _, loss = self.on_forward(True, model, criterion, inputs, target, inp.expand(inputs.size(0), -1, -1), optimizer)
                total += loss.item()
            model.eval()
            with torch.no_grad():
                vx, vy = val_dataset.tensors
                out, vloss = self.on_forward(False, model, criterion, vx, vy, inp.expand(vx.size(0), -1, -1))
            print(f"epoch {epoch}: train loss {total / (i + 1):.4f}  val loss {vloss.item():.4f}  "
                  f"val mAP {100 * average_precision(out, vy):.2f}")


def make_data(n, g, label_protos):
    # correlated labels: each image has a "scene" that switches on a group of labels
    scene = torch.randint(0, 3, (n,), generator=g)
    groups = torch.tensor([[1, 1, 1, 0, 0, 0, 0, 0, 0, 1], [0, 0, 1, 1, 1, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 1, 1, 1, 1, 0]]).float()
    probs = 0.75 * groups[scene] + 0.05
    target = (torch.rand(n, NUM_CLASSES, generator=g) < probs).float()
    imgs = torch.einsum("nk,kchw->nchw", target, label_protos) + 0.6 * torch.randn(n, 3, IMG, IMG, generator=g)
    return imgs, target


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    label_protos = 0.5 * torch.randn(NUM_CLASSES, 3, IMG, IMG, generator=g)
    word_vec = torch.randn(NUM_CLASSES, IN_CHANNEL, generator=g)
    train_ds = TensorDataset(*make_data(640, g, label_protos))
    val_ds = TensorDataset(*make_data(256, g, label_protos))
    model = GCNResnet(NUM_CLASSES, IN_CHANNEL)
    criterion = nn.MultiLabelSoftMarginLoss()
    optimizer = torch.optim.SGD(model.get_config_optim(lr=0.05, lrp=0.1), lr=0.05, momentum=0.9, weight_decay=1e-4)
    engine = GCNMultiLabelMAPEngine({"batch_size": 32, "max_epochs": 5, "word_vec": word_vec})
    engine.learning(model, criterion, train_ds, val_ds, optimizer)


if __name__ == "__main__":
    main()
