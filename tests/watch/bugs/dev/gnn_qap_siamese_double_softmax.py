"""A siamese graph neural network for graph matching (the quadratic-assignment task) in the
layout of a research codebase: each sample is a pair of graphs, a random graph and a noisy copy
of it with the same vertex order; a shared message-passing GNN embeds the vertices of both graphs
and the model returns raw similarity scores of shape (bs, n_vertices, n_vertices). A loss class
(triplet_loss, an nn.Module holding nn.CrossEntropyLoss(reduction='sum')) loops over the batch and
treats each row of a score matrix as a classification over the other graph's vertices, target =
the identity matching; a train_triplet(train_loader, model, optimizer, helper, ...) helper does
zero_grad / backward / step and prints the loss and the row-argmax accuracy every print_freq
batches. The loss class applies torch.softmax to the raw scores before handing them to
CrossEntropyLoss, which applies log_softmax again. The doubly-normalised scores live in [0, 1], so
the loss can never drop much below log(n) and its gradient is squashed; training runs without any
error but the loss stays near its starting value and the matching accuracy rises far more slowly
than it should.

Thread: https://github.com/mlelarge/graph_neural_net/pull/37
"""
import time

import torch
from torch import nn


# ----------------------------------------------------------------------------- data
class QAPDataset(torch.utils.data.Dataset):
    def __init__(self, n_samples, n_vertices=20, edge_p=0.3, noise=0.05, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.pairs = []
        for _ in range(n_samples):
            a = (torch.rand(n_vertices, n_vertices, generator=g) < edge_p).float().triu(1)
            a = a + a.t()
            flip = (torch.rand(n_vertices, n_vertices, generator=g) < noise).float().triu(1)
            flip = flip + flip.t()
            b = (a + flip) % 2
            self.pairs.append(torch.stack([a, b]))

    def __len__(self):
        return len(self.pairs)

    def __getitem__(self, i):
        return self.pairs[i], torch.empty(0)


# ----------------------------------------------------------------------------- model
class GNNLayer(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.self_lin = nn.Linear(d_in, d_out)
        self.neigh_lin = nn.Linear(d_in, d_out)
        self.norm = nn.LayerNorm(d_out)

    def forward(self, h, adj):
        deg = adj.sum(-1, keepdim=True).clamp(min=1)
        return torch.relu(self.norm(self.self_lin(h) + self.neigh_lin(adj @ h / deg)))


class GNN(nn.Module):
    def __init__(self, n_layers=4, d=64):
        super().__init__()
        self.inp = nn.Linear(3, d)
        self.layers = nn.ModuleList([GNNLayer(d, d) for _ in range(n_layers)])
        self.out = nn.Linear(d, d)

    def forward(self, adj):
        deg = adj.sum(-1, keepdim=True)
        two_hop = adj @ deg
        tri = (adj @ adj * adj).sum(-1, keepdim=True)
        h = self.inp(torch.cat([deg / 10, two_hop / 50, tri / 10], dim=-1))
        for layer in self.layers:
            h = layer(h, adj)
        return self.out(h)


class Siamese_Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gnn = GNN()

    def forward(self, data):
        e1 = self.gnn(data[:, 0])
        e2 = self.gnn(data[:, 1])
        return e1 @ e2.transpose(1, 2)  # raw scores (bs, n, n)


# ----------------------------------------------------------------------------- loss / metric
class triplet_loss(nn.Module):
    def __init__(self, loss_reduction="mean", loss=nn.CrossEntropyLoss(reduction="sum")):
        super().__init__()
        self.loss = loss
        if loss_reduction == "mean":
            self.increments = lambda new_loss, n_vertices: (new_loss, n_vertices)
        else:
            self.increments = lambda new_loss, n_vertices: (new_loss / n_vertices, 1)

    def forward(self, raw_scores, target_dummy):
        loss = 0
        total = 0
        outputs = torch.softmax(raw_scores, -1)
        for out in outputs:
            n_vertices = out.shape[0]
            target = torch.arange(n_vertices)
            incrs = self.increments(self.loss(out, target), n_vertices)
            loss += incrs[0]
            total += incrs[1]
        return loss / total


def accuracy_max(weights, dummy_target):
    acc, total = 0, 0
    for w in weights:
        preds = w.argmax(1)
        acc += (preds == torch.arange(len(w))).sum().item()
        total += len(w)
    return acc, total


class Helper:
    def __init__(self, criterion, eval_function):
        self.criterion = criterion
        self.eval_function = eval_function


# ----------------------------------------------------------------------------- train / val
def train_triplet(train_loader, model, optimizer, helper, device, epoch, eval_score=False, print_freq=50):
    model.train()
    for i, (data, target) in enumerate(train_loader):
        data, target_deviced = data.to(device), target.to(device)
        raw_scores = model(data)
        loss = helper.criterion(raw_scores, target_deviced)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if (i + 1) % print_freq == 0 and eval_score:
            acc, n = helper.eval_function(raw_scores.detach(), target_deviced)
            print(f"Epoch: [{epoch}][{i + 1}/{len(train_loader)}]  Loss {loss.item():.4f}  Acc {acc / n:.3f}")


def val_triplet(val_loader, model, helper, device, epoch):
    model.eval()
    losses, acc, tot = [], 0, 0
    with torch.no_grad():
        for data, target in val_loader:
            raw_scores = model(data.to(device))
            losses.append(helper.criterion(raw_scores, target).item())
            a, n = helper.eval_function(raw_scores, target)
            acc += a; tot += n
    print(f"Validation set, epoch {epoch}: loss {sum(losses) / len(losses):.4f}  acc {acc / tot:.3f}")


def main():
    torch.manual_seed(0)
    device = "cpu"
    train_set = QAPDataset(1600, seed=0)
    val_set = QAPDataset(320, seed=1)
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=32, shuffle=True,
                                               generator=torch.Generator().manual_seed(0))
    val_loader = torch.utils.data.DataLoader(val_set, batch_size=64)
    model = Siamese_Model().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    helper = Helper(triplet_loss(), accuracy_max)
    t0 = time.time()
    for epoch in range(10):
        train_triplet(train_loader, model, optimizer, helper, device, epoch, eval_score=True)
        val_triplet(val_loader, model, helper, device, epoch)
    print(f"done in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
