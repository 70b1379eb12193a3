"""A relational GCN for entity classification in the style of a graph library's example: a BaseRGCN
module builds its layer list from build_input_layer / build_hidden_layer / build_output_layer, an
EntityClassify subclass fills them with basis-decomposed relational graph convolutions over
featureless nodes (the node id is the input), and main(args) trains the whole graph once per epoch
with Adam and F.cross_entropy(logits[train_idx], labels[train_idx]). The output layer is built with
activation=partial(F.softmax, dim=1), so the "logits" handed to F.cross_entropy are already
probabilities and the loss applies a second softmax over them.

Thread: https://github.com/dmlc/dgl/issues/1204
"""
import argparse
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn


class RelGraphConv(nn.Module):
    """Sum over incoming edges of norm * h_src @ W_rel, with W_rel a mix of shared bases."""

    def __init__(self, in_feat, out_feat, num_rels, num_bases=-1, activation=None, dropout=0.0):
        super().__init__()
        self.num_rels = num_rels
        self.num_bases = num_rels if num_bases is None or num_bases <= 0 else num_bases
        self.bases = nn.Parameter(torch.empty(self.num_bases, in_feat, out_feat))
        nn.init.xavier_uniform_(self.bases, gain=nn.init.calculate_gain("relu"))
        if self.num_bases < num_rels:
            self.coeff = nn.Parameter(torch.empty(num_rels, self.num_bases))
            nn.init.xavier_uniform_(self.coeff, gain=nn.init.calculate_gain("relu"))
        else:
            self.coeff = None
        self.bias = nn.Parameter(torch.zeros(out_feat))
        self.activation = activation
        self.dropout = nn.Dropout(dropout)

    def weight(self):
        if self.coeff is None:
            return self.bases
        return torch.einsum("rb,bio->rio", self.coeff, self.bases)

    def forward(self, g, h, etypes, norm):
        src, dst = g
        w = self.weight()
        if h.dtype == torch.long:       # featureless input: row h[src] of each relation's weight
            msg = w[etypes, h[src]]
        else:
            msg = torch.bmm(h[src].unsqueeze(1), w[etypes]).squeeze(1)
        out = torch.zeros(h.shape[0], w.shape[2]).index_add_(0, dst, msg * norm)
        out = out + self.bias
        if self.activation is not None:
            out = self.activation(out)
        return self.dropout(out)


class BaseRGCN(nn.Module):
    def __init__(self, num_nodes, h_dim, out_dim, num_rels, num_bases, num_hidden_layers=1, dropout=0):
        super().__init__()
        self.num_nodes, self.h_dim, self.out_dim = num_nodes, h_dim, out_dim
        self.num_rels, self.num_bases = num_rels, num_bases
        self.num_hidden_layers, self.dropout = num_hidden_layers, dropout
        self.build_model()

    def build_model(self):
        self.layers = nn.ModuleList()
        i2h = self.build_input_layer()
        if i2h is not None:
            self.layers.append(i2h)
        for idx in range(self.num_hidden_layers):
            self.layers.append(self.build_hidden_layer(idx))
        h2o = self.build_output_layer()
        if h2o is not None:
            self.layers.append(h2o)

    def build_input_layer(self):
        return None

    def build_hidden_layer(self, idx):
        raise NotImplementedError

    def build_output_layer(self):
        return None

    def forward(self, g, h, r, norm):
        for layer in self.layers:
            h = layer(g, h, r, norm)
        return h


class EntityClassify(BaseRGCN):
    def build_input_layer(self):
        return RelGraphConv(self.num_nodes, self.h_dim, self.num_rels, self.num_bases,
                            activation=F.relu, dropout=self.dropout)

    def build_hidden_layer(self, idx):
        return RelGraphConv(self.h_dim, self.h_dim, self.num_rels, self.num_bases,
                            activation=F.relu, dropout=self.dropout)

    def build_output_layer(self):
        return RelGraphConv(self.h_dim, self.out_dim, self.num_rels, self.num_bases,
                            activation=partial(F.softmax, dim=1))


def load_data(num_nodes=400, num_classes=4, num_base_rels=3, seed=0):
    """Typed graph: each entity links to hub entities of its class through a class-specific
    relation, plus noisy edges of random relations; every relation also has an inverse."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, num_classes, (num_nodes,), generator=g)
    hubs = torch.arange(num_classes * 3).view(num_classes, 3)    # entities 0..11 act as hubs
    src, dst, rel = [], [], []
    for v in range(num_classes * 3, num_nodes):
        c = int(labels[v])
        for _ in range(2):
            true_rel = c % num_base_rels if torch.rand(1, generator=g) < 0.8 else int(torch.randint(0, num_base_rels, (1,), generator=g))
            src.append(v); dst.append(int(hubs[c, torch.randint(0, 3, (1,), generator=g)])); rel.append(true_rel)
        for _ in range(2):
            src.append(v); dst.append(int(torch.randint(0, num_nodes, (1,), generator=g)))
            rel.append(int(torch.randint(0, num_base_rels, (1,), generator=g)))
    src, dst, rel = torch.tensor(src), torch.tensor(dst), torch.tensor(rel)
    edge_src = torch.cat([src, dst])
    edge_dst = torch.cat([dst, src])
    edge_type = torch.cat([rel, rel + num_base_rels])
    key = edge_dst * (2 * num_base_rels) + edge_type
    counts = torch.bincount(key, minlength=num_nodes * 2 * num_base_rels).float()
    edge_norm = (1.0 / counts[key]).unsqueeze(1)
    perm = torch.randperm(num_nodes - num_classes * 3, generator=g) + num_classes * 3
    train_idx, test_idx = perm[:140], perm[140:]
    return dict(num_nodes=num_nodes, num_rels=2 * num_base_rels, num_classes=num_classes, labels=labels,
                train_idx=train_idx, test_idx=test_idx, edge_src=edge_src, edge_dst=edge_dst,
                edge_type=edge_type, edge_norm=edge_norm)


def main(args):
    torch.manual_seed(0)
    data = load_data()
    labels, train_idx, test_idx = data["labels"], data["train_idx"], data["test_idx"]
    if args.validation:
        val_idx = train_idx[:len(train_idx) // 5]
        train_idx = train_idx[len(train_idx) // 5:]
    else:
        val_idx = train_idx
    feats = torch.arange(data["num_nodes"])
    g = (data["edge_src"], data["edge_dst"])
    edge_type, edge_norm = data["edge_type"], data["edge_norm"]

    model = EntityClassify(data["num_nodes"], args.n_hidden, data["num_classes"], data["num_rels"],
                           num_bases=args.n_bases, num_hidden_layers=args.n_layers - 2, dropout=args.dropout)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.l2norm)

    model.train()
    for epoch in range(args.n_epochs):
        optimizer.zero_grad()
        logits = model(g, feats, edge_type, edge_norm)
        loss = F.cross_entropy(logits[train_idx], labels[train_idx])
        loss.backward()
        optimizer.step()
        train_acc = (logits[train_idx].argmax(1) == labels[train_idx]).float().mean().item()
        val_loss = F.cross_entropy(logits[val_idx], labels[val_idx])
        val_acc = (logits[val_idx].argmax(1) == labels[val_idx]).float().mean().item()
        if epoch % 10 == 0 or epoch == args.n_epochs - 1:
            print(f"Epoch {epoch:05d} | Train Accuracy: {train_acc:.4f} | Train Loss: {loss.item():.4f} | "
                  f"Validation Accuracy: {val_acc:.4f} | Validation loss: {val_loss.item():.4f}")

    model.eval()
    logits = model(g, feats, edge_type, edge_norm)
    test_loss = F.cross_entropy(logits[test_idx], labels[test_idx])
    test_acc = (logits[test_idx].argmax(1) == labels[test_idx]).float().mean().item()
    print(f"Test Accuracy: {test_acc:.4f} | Test loss: {test_loss.item():.4f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="RGCN")
    parser.add_argument("--dropout", type=float, default=0)
    parser.add_argument("--n-hidden", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--n-bases", type=int, default=-1)
    parser.add_argument("--n-layers", type=int, default=2)
    parser.add_argument("-e", "--n-epochs", type=int, default=80)
    parser.add_argument("--l2norm", type=float, default=0)
    parser.add_argument("--validation", dest="validation", action="store_true")
    parser.add_argument("--testing", dest="validation", action="store_false")
    parser.set_defaults(validation=True)
    main(parser.parse_args())
