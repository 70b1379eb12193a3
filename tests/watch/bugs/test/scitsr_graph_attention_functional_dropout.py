"""A table-structure-recognition graph attention model and its Trainer, in the style of a
scientific-table parser: each table is a graph whose nodes are text chunks (position and size
features) and whose edges join neighbouring chunks (offset and overlap features); the model embeds
nodes and edges with small MLPs, runs attention blocks that update nodes from their incident edges
and edges from their end nodes (an Attention unit with a masked softmax over the incidence matrix,
residual + LayerNorm, a feed-forward sublayer), and classifies every edge as no-relation /
same-row / same-column. A Trainer class holds model, datasets, criterion (class-weighted
CrossEntropyLoss) and optimizer, and its train() loop calls train_epoch() (model.train(), one graph
per step, clip_grad_norm_, Adam with weight decay) and test_epoch() (model.eval(), accuracy over
labelled edges with the no-relation label masked) every epoch. The bug: the Attention unit applies
its two dropouts as torch.nn.functional.dropout(x, p=self.d_rate) with d_rate 0.4 and no
training flag, so model.eval() cannot switch them off; every test epoch still drops 40% of the
attention and feed-forward outputs at random, the reported test accuracy is that of a randomly
damaged model and two evaluations of the same trained model on the same tables disagree.

Thread: https://github.com/Academic-Hammer/SciTSR/pull/16
"""
import math

import torch


class Attention(torch.nn.Module):
    def __init__(self, size):
        super().__init__()
        self.size = size
        self.linear_q = torch.nn.Linear(size, size, bias=False)
        self.linear_k = torch.nn.Linear(size, size, bias=False)
        self.linear_v = torch.nn.Linear(size, size, bias=False)
        self.layer_norm_1 = torch.nn.LayerNorm(size)
        self.feed_forward = torch.nn.Sequential(
            torch.nn.Linear(size, size, bias=False), torch.nn.ReLU(), torch.nn.Linear(size, size, bias=False))
        self.layer_norm_2 = torch.nn.LayerNorm(size)
        self.d_rate = 0.4

    def masked_softmax(self, x, mask, dim):
        ex = torch.exp(x - x.max(dim=dim, keepdim=True)[0])
        masked = ex * mask.float()
        return masked / (masked.sum(dim=dim, keepdim=True) + 1e-6)

    def forward(self, x, y, mask):
        q, k, v = self.linear_q(x), self.linear_k(y), self.linear_v(y)
        score = self.masked_softmax(torch.mm(q, k.t()) / math.sqrt(self.size), mask, dim=1)
        x_atten = torch.mm(score, v)
        x_atten = torch.nn.functional.dropout(x_atten, p=self.d_rate)
        x = self.layer_norm_1(x + x_atten)
        x_linear = self.feed_forward(x)
        x_linear = torch.nn.functional.dropout(x_linear, p=self.d_rate)
        return self.layer_norm_2(x + x_linear)


class AttentionBlock(torch.nn.Module):
    def __init__(self, size):
        super().__init__()
        self.atten_e2v = Attention(size)
        self.atten_v2e = Attention(size)

    def forward(self, nodes, edges, incidence):
        new_nodes = self.atten_e2v(nodes, edges, incidence)
        new_edges = self.atten_v2e(edges, nodes, incidence.t())
        return new_nodes, new_edges


class GraphAttention(torch.nn.Module):
    def __init__(self, n_node_features, n_edge_features, hidden_size, output_size, n_blocks):
        super().__init__()
        self.node_transform = torch.nn.Sequential(
            torch.nn.Linear(n_node_features, hidden_size), torch.nn.ReLU(), torch.nn.Linear(hidden_size, hidden_size))
        self.edge_transform = torch.nn.Sequential(
            torch.nn.Linear(n_edge_features, hidden_size), torch.nn.ReLU(), torch.nn.Linear(hidden_size, hidden_size))
        self.attention_blocks = torch.nn.ModuleList([AttentionBlock(hidden_size) for _ in range(n_blocks)])
        self.output_linear = torch.nn.Linear(hidden_size, output_size)

    def forward(self, nodes, edges, incidence):
        nodes, edges = self.node_transform(nodes), self.edge_transform(edges)
        for block in self.attention_blocks:
            nodes, edges = block(nodes, edges, incidence)
        return self.output_linear(edges)


class Table:
    def __init__(self, nodes, edges, incidence, labels):
        self.nodes, self.edges, self.incidence, self.labels = nodes, edges, incidence, labels


def make_table(gen):
    """Chunks on a jittered grid; edges to the nearest chunks; label 1 same row, 2 same column."""
    rows, cols = int(torch.randint(3, 7, (1,), generator=gen)), int(torch.randint(2, 5, (1,), generator=gen))
    col_x = torch.cumsum(0.5 + torch.rand(cols, generator=gen), 0)
    row_y = torch.cumsum(0.15 + 0.2 * torch.rand(rows, generator=gen), 0)
    r = torch.arange(rows).repeat_interleave(cols)
    c = torch.arange(cols).repeat(rows)
    w = 0.2 + 0.3 * torch.rand(rows * cols, generator=gen)
    h = torch.full((rows * cols,), 0.15)
    x = col_x[c] + 0.25 * torch.randn(rows * cols, generator=gen)
    y = row_y[r] + 0.06 * torch.randn(rows * cols, generator=gen)
    nodes = torch.stack([x / col_x[-1], y / row_y[-1], w, h, torch.rand(rows * cols, generator=gen)], 1)
    d = torch.cdist(torch.stack([x, y], 1), torch.stack([x, y], 1)) + torch.eye(rows * cols) * 1e3
    pairs = set()
    for i in range(rows * cols):
        for j in d[i].topk(4, largest=False).indices.tolist():
            pairs.add((min(i, j), max(i, j)))
    pairs = sorted(pairs)
    src, dst = torch.tensor([p[0] for p in pairs]), torch.tensor([p[1] for p in pairs])
    dx, dy = x[dst] - x[src], y[dst] - y[src]
    edges = torch.stack([dx, dy, dx.abs(), dy.abs(), (dx ** 2 + dy ** 2).sqrt(), w[src] - w[dst]], 1)
    labels = torch.zeros(len(pairs), dtype=torch.long)
    labels[r[src] == r[dst]] = 1
    labels[c[src] == c[dst]] = 2
    incidence = torch.zeros(rows * cols, len(pairs))
    incidence[src, torch.arange(len(pairs))] = 1
    incidence[dst, torch.arange(len(pairs))] = 1
    return Table(nodes, edges, incidence, labels)


class Trainer:
    def __init__(self, model, train_dataset, test_dataset, criterion, optimizer, n_epochs, weight_clipping):
        self.model, self.train_dataset, self.test_dataset = model, train_dataset, test_dataset
        self.criterion, self.optimizer = criterion, optimizer
        self.n_epochs, self.weight_clipping = n_epochs, weight_clipping

    def train(self):
        print("Start training ...")
        for epoch in range(1, self.n_epochs + 1):
            loss = self.train_epoch(epoch, self.train_dataset)
            print(f"[Epoch {epoch:2d}] train | loss: {loss:.3f}")
            test_acc = self.test_epoch(epoch, self.test_dataset)
            print(f"[Epoch {epoch:2d}] test | t_acc: {test_acc:.3f}")
        print("Training finished.")
        return self.model

    def train_epoch(self, epoch, dataset):
        self.model.train()
        loss_list = []
        order = torch.randperm(len(dataset))
        for index in order.tolist():
            data = dataset[index]
            outputs = self.model(data.nodes, data.edges, data.incidence)
            loss = self.criterion(outputs, data.labels)
            loss_list.append(loss.item())
            self.optimizer.zero_grad()
            loss.backward()
            if self.weight_clipping is not None:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm=self.weight_clipping)
            self.optimizer.step()
        return sum(loss_list) / len(loss_list)

    def test_epoch(self, epoch, dataset, use_mask=True):
        """use_mask: do not count the edges labelled 0 (no relation)"""
        self.model.eval()
        acc_list = []
        with torch.no_grad():
            for data in dataset:
                outputs = self.model(data.nodes, data.edges, data.incidence)
                labels = data.labels
                n = len(labels)
                if use_mask:
                    n = int((labels != 0).sum())
                    labels = torch.where(labels == 0, torch.full_like(labels, -1), labels)
                acc_list.append((outputs.max(dim=1)[1] == labels).float().sum().item() / max(n, 1))
        return sum(acc_list) / len(acc_list)


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    train_dataset = [make_table(gen) for _ in range(80)]
    test_dataset = [make_table(gen) for _ in range(30)]
    model = GraphAttention(n_node_features=5, n_edge_features=6, hidden_size=32, output_size=3, n_blocks=2)
    criterion = torch.nn.CrossEntropyLoss(torch.FloatTensor([0.2, 1, 1]))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.003, weight_decay=1e-4)
    trainer = Trainer(model, train_dataset, test_dataset, criterion, optimizer, n_epochs=6, weight_clipping=1)
    model = trainer.train()
    for run in range(2):  # the saved model, evaluated again on the same tables
        print(f"final evaluation {run}: t_acc {trainer.test_epoch(0, test_dataset):.4f}")


if __name__ == "__main__":
    main()
