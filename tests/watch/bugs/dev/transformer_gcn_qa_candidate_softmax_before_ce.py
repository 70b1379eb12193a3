"""Multi-hop QA over an entity graph, shaped like a Transformer + relational-GCN reader:
the model concatenates an encoded query with every encoded mention, runs a few dense
layers and summed relational graph-conv layers, scores each mention with an fc stack
ending in a single unit, takes the max mention score per answer candidate, and
returns a loss computed inside `forward` when a one-hot target is given. A `train()`
helper takes the model and optimizer, feeds one question at a time, divides the loss
by the batch size and steps every `batch_size` questions after gradient clipping. The
bug: the per-candidate scores are turned into probabilities with
`exp(LogSoftmax(dim=0))` and those probabilities are given to `nn.CrossEntropyLoss`,
which applies its own log-softmax. The loss can then never go below the floor of a
softmax over values in [0, 1], the gradient on the scores is squashed, and the
reader learns slowly and weakly although the run looks normal.

Thread: https://github.com/bowang-lab/Transformer-GCN-QA/pull/32
"""
import torch
import torch.nn as nn

Q_DIM = 24
N_REL = 2


class RelGraphConv(nn.Module):
    """Minimal relational graph conv: one weight per relation plus a self loop."""

    def __init__(self, size, n_rels):
        super().__init__()
        self.rel = nn.ModuleList(nn.Linear(size, size, bias=False) for _ in range(n_rels))
        self.root = nn.Linear(size, size)

    def forward(self, x, adj):  # adj: (n_rels, n, n), row-normalised
        out = self.root(x)
        for r, lin in enumerate(self.rel):
            out = out + adj[r] @ lin(x)
        return out


class TransformerGCNQA(nn.Module):
    def __init__(self, rgcn_size=32, n_rgcn_layers=2, dropout_rate=0.1):
        super().__init__()
        self.n_rgcn_layers = n_rgcn_layers
        self.fc_1 = nn.Linear(2 * Q_DIM, 48)
        self.fc_2 = nn.Linear(48, rgcn_size)
        self.leaky_relu = nn.LeakyReLU()
        self.dropout = nn.Dropout(dropout_rate)
        self.rgcn_layer = RelGraphConv(rgcn_size, N_REL)
        self.fc_3 = nn.Linear(rgcn_size + Q_DIM, 32)
        self.fc_4 = nn.Linear(32, 16)
        self.fc_5 = nn.Linear(16, 1)
        self.log_softmax = nn.LogSoftmax(dim=0)

    def encode_query_aware_mentions(self, encoded_query, encoded_mentions):
        n = encoded_mentions.shape[0]
        cat = torch.cat((encoded_query.expand(n, -1), encoded_mentions), dim=-1)
        h = self.dropout(self.leaky_relu(self.fc_1(cat)))
        return self.dropout(self.leaky_relu(self.fc_2(h)))

    def forward(self, encoded_query, candidate_indices, encoded_mentions, adj, target=None):
        x = self.encode_query_aware_mentions(encoded_query, encoded_mentions)
        rgcn_sum = torch.zeros_like(x)
        for _ in range(self.n_rgcn_layers):
            x = self.rgcn_layer(x, adj)
            rgcn_sum = rgcn_sum + x
        x = torch.cat([rgcn_sum, encoded_query.expand(len(rgcn_sum), -1)], dim=-1)
        logits = self.dropout(self.fc_3(x))
        logits = self.dropout(self.fc_4(logits))
        logits = self.fc_5(logits).squeeze(-1)  # one score per mention

        masked_max = torch.zeros(len(candidate_indices))
        for i, idxs in enumerate(candidate_indices):
            masked_max[i] = torch.max(logits[idxs])
        # probabilities over the candidates ...
        masked_softmax = torch.exp(self.log_softmax(masked_max))

        if target is not None:
            loss_fct = nn.CrossEntropyLoss()
            class_index = torch.argmax(target, 1)
            # ... fed to a loss that expects unnormalised scores
            loss = loss_fct(masked_softmax.view(-1, len(candidate_indices)), class_index)
            return masked_softmax, loss
        return masked_softmax


def make_dataset(n, gen, n_cands=6):
    key = torch.randn(Q_DIM, Q_DIM, generator=gen) / Q_DIM ** 0.5
    data = []
    for _ in range(n):
        query = torch.randn(1, Q_DIM, generator=gen)
        answer = int(torch.randint(0, n_cands, (1,), generator=gen))
        mentions, cand_idx = [], []
        for c in range(n_cands):
            k = int(torch.randint(1, 4, (1,), generator=gen))
            m = torch.randn(k, Q_DIM, generator=gen)
            if c == answer:
                m[0] = m[0] * 0.3 + 2.0 * (query @ key).squeeze(0)  # one mention matches the query
            start = sum(len(x) for x in mentions)
            cand_idx.append(list(range(start, start + k)))
            mentions.append(m)
        mentions = torch.cat(mentions)
        n_m = mentions.shape[0]
        adj = (torch.rand(N_REL, n_m, n_m, generator=gen) < 0.3).float()
        adj = adj / adj.sum(-1, keepdim=True).clamp(min=1)
        target = torch.zeros(1, n_cands)
        target[0, answer] = 1
        data.append((query, cand_idx, mentions, adj, target))
    return data


def evaluate(model, data):
    model.eval()
    correct = 0
    with torch.no_grad():
        for q, ci, m, adj, t in data:
            probs = model(q, ci, m, adj)
            correct += int(probs.argmax() == t.argmax())
    return correct / len(data)


def train(model, optimizer, dataset, dev_set, epochs, batch_size, grad_norm):
    for epoch in range(epochs):
        model.train()
        optimizer.zero_grad()
        train_loss, train_steps = 0.0, 0
        for i, (q, ci, m, adj, t) in enumerate(dataset):
            _, loss = model(q, ci, m, adj, t)
            loss = loss / batch_size
            loss.backward()
            train_loss += loss.item()
            if (i + 1) % batch_size == 0 or i == len(dataset) - 1:
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=grad_norm)
                optimizer.step()
                optimizer.zero_grad()
                train_steps += 1
        print(f"epoch {epoch + 1}: train loss {train_loss / train_steps:.4f} "
              f"dev acc {evaluate(model, dev_set):.3f} ({train_steps} steps)")


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    train_set = make_dataset(800, gen)
    dev_set = make_dataset(200, gen)
    model = TransformerGCNQA()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    train(model, optimizer, train_set, dev_set, epochs=2, batch_size=8, grad_norm=1.0)


if __name__ == "__main__":
    main()
