"""A small layer library in the texar style: MergeLayer(layers, mode) runs several layers on the
same input and concatenates their outputs, and a Conv1D text classifier uses it for parallel
convolutions with kernel sizes 3, 4 and 5 over word embeddings. MergeLayer keeps its layers in a
plain Python list (self._layers), so the convolutions are not registered with the classifier: the
optimizer built from model.parameters() trains the embedding and the output layer only and the
filters keep their random weights. A train_epoch(model, optimizer, batches) helper drives it.

Thread: https://github.com/asyml/texar-pytorch/issues/72
"""
import torch
import torch.nn.functional as F
from torch import nn


class MergeLayer(nn.Module):
    def __init__(self, layers=None, mode="concat", dim=None):
        super().__init__()
        self._mode = mode
        self._dim = dim
        self._layers = None
        if layers is not None:
            self._layers = []
            for layer in layers:
                self._layers.append(layer)

    def forward(self, input):
        if self._layers is None:
            return input
        outputs = [layer(input) for layer in self._layers]
        if self._mode == "concat":
            return torch.cat(outputs, dim=self._dim if self._dim is not None else -1)
        if self._mode == "sum":
            return torch.stack(outputs).sum(0)
        raise ValueError(self._mode)


class ConvPool(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        return F.relu(self.conv(x)).max(dim=2).values


class Conv1DClassifier(nn.Module):
    def __init__(self, vocab_size, emb_dim, filters, kernel_sizes, num_classes):
        super().__init__()
        self.embedder = nn.Embedding(vocab_size, emb_dim)
        self.merge = MergeLayer([ConvPool(emb_dim, filters, k) for k in kernel_sizes], mode="concat")
        self.dropout = nn.Dropout(0.1)
        self.logits = nn.Linear(filters * len(kernel_sizes), num_classes)

    def forward(self, tokens):
        x = self.embedder(tokens).transpose(1, 2)
        return self.logits(self.dropout(self.merge(x)))


def sentiment_batches(n_batches, batch_size, seq_len, vocab_size, seed):
    g = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(n_batches):
        tokens = torch.randint(4, vocab_size, (batch_size, seq_len), generator=g)
        label = torch.randint(0, 2, (batch_size,), generator=g)
        pos = torch.randint(0, seq_len - 3, (batch_size,), generator=g)
        for i in range(batch_size):  # a three-word cue phrase decides the label
            phrase = [1, 2, 3] if label[i] == 1 else [3, 2, 1]
            tokens[i, pos[i]:pos[i] + 3] = torch.tensor(phrase)
        batches.append((tokens, label))
    return batches


def train_epoch(model, optimizer, batches):
    model.train()
    for step, (tokens, label) in enumerate(batches):
        loss = F.cross_entropy(model(tokens), label)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 15 == 0:
            print(f"  step {step} loss {loss.item():.4f}")


def accuracy(model, batches):
    model.eval()
    with torch.no_grad():
        hits = sum((model(t).argmax(1) == y).sum().item() for t, y in batches)
    return hits / sum(len(y) for _, y in batches)


def main():
    torch.manual_seed(0)
    model = Conv1DClassifier(vocab_size=200, emb_dim=32, filters=16, kernel_sizes=[3, 4, 5], num_classes=2)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    train_batches = sentiment_batches(40, 32, 30, 200, seed=0)
    eval_batches = sentiment_batches(8, 64, 30, 200, seed=1)
    conv_before = model.merge._layers[0].conv.weight.detach().clone()
    for epoch in range(2):
        train_epoch(model, optimizer, train_batches)
        change = (model.merge._layers[0].conv.weight - conv_before).abs().max().item()
        print(f"epoch {epoch} eval acc {accuracy(model, eval_batches):.3f} conv filter change {change:.2e}")


if __name__ == "__main__":
    main()
