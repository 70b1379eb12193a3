"""
Shape: graph-attention model file: NodeEdgeAttn(torch.nn.Module) with q/k/v Linear layers, a masked softmax helper, residual + LayerNorm blocks, and dropout applied through the fully qualified torch.nn.functional.dropout with a rate stored in self.d_rate; BiAttnBlock and TableGraphNet (nn.ModuleList of blocks) wrap it.
Bug: torch.nn.functional.dropout(..., p=self.d_rate) is called without training=self.training, so dropout stays on after model.eval().
Thread: https://github.com/Academic-Hammer/SciTSR/pull/16
"""
import math

import torch


class NodeEdgeAttn(torch.nn.Module):
    def __init__(self, dim_h):
        super(NodeEdgeAttn, self).__init__()
        self.size = dim_h
        self.to_q = torch.nn.Linear(dim_h, dim_h, bias=False)
        self.to_k = torch.nn.Linear(dim_h, dim_h, bias=False)
        self.to_v = torch.nn.Linear(dim_h, dim_h, bias=False)
        self.norm_a = torch.nn.LayerNorm(dim_h)
        self.ffn = torch.nn.Sequential(
            torch.nn.Linear(dim_h, dim_h, bias=False),
            torch.nn.ReLU(),
            torch.nn.Linear(dim_h, dim_h, bias=False),
        )
        self.norm_b = torch.nn.LayerNorm(dim_h)
        self.d_rate = 0.4

    def mask_softmax(self, x, mask, dim):
        e = torch.exp(x) * mask.float()
        return e / (e.sum(dim=dim, keepdim=True) + 1e-6)

    def forward(self, x, y, mask):
        q = self.to_q(x)
        k = self.to_k(y)
        v = self.to_v(y)
        att = self.mask_softmax(torch.mm(q, k.t()) / math.sqrt(self.size), mask, dim=1)
        mixed = torch.mm(att, v)
        mixed = torch.nn.functional.dropout(mixed, p=self.d_rate)
        x = self.norm_a(x + mixed)
        ff = self.ffn(x)
        ff = torch.nn.functional.dropout(ff, p=self.d_rate)
        return self.norm_b(x + ff)


class BiAttnBlock(torch.nn.Module):
    def __init__(self, dim_h):
        super(BiAttnBlock, self).__init__()
        self.edge_to_node = NodeEdgeAttn(dim_h)
        self.node_to_edge = NodeEdgeAttn(dim_h)

    def forward(self, v, e, adj, inc):
        upd_nodes = self.edge_to_node(v, e, inc)
        upd_edges = self.node_to_edge(e, v, inc.t())
        return upd_nodes, upd_edges


class TableGraphNet(torch.nn.Module):
    def __init__(self, n_node_features, n_edge_features, hid, n_out, depth):
        super(TableGraphNet, self).__init__()
        self.node_enc = torch.nn.Sequential(
            torch.nn.Linear(n_node_features, hid), torch.nn.ReLU(),
            torch.nn.Linear(hid, hid))
        self.edge_enc = torch.nn.Sequential(
            torch.nn.Linear(n_edge_features, hid), torch.nn.ReLU(),
            torch.nn.Linear(hid, hid))
        self.blocks = torch.nn.ModuleList()
        for _ in range(depth):
            self.blocks.append(BiAttnBlock(hid))
        self.head = torch.nn.Linear(hid, n_out)

    def forward(self, v, e, adj, inc):
        v = self.node_enc(v)
        e = self.edge_enc(e)
        for block in self.blocks:
            v, e = block(v, e, adj, inc)
        return torch.nn.functional.softmax(self.head(e), dim=1)
