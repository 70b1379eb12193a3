"""A Deep Embedded Clustering package in the style of pt-dec: a DEC module holds an encoder and a
ClusterAssignment module whose cluster_centers parameter gives Student's t soft assignments q; a
module-level train(dataset, model, epochs, batch_size, optimizer, ...) runs the encoder over an
unshuffled loader, fits k-means on the embeddings, installs the k-means centres, and then loops over a
shuffled loader computing the target distribution p from each batch's q, KLDivLoss(sum) / batch size,
zero_grad / backward / step, with predict() and the best-permutation cluster accuracy after every epoch.
The caller builds SGD(model.parameters(), momentum=0.9) before calling train(). Inside train() the
k-means centres are installed with model.assignment.cluster_centers = nn.Parameter(centres): that
registers a brand-new tensor on the module, while the optimizer still holds the old, now unused
centre tensor. The new centres get a gradient after every backward and never move; only the encoder
is trained against centres frozen at their k-means values.

Thread: https://github.com/vlukiyanov/pt-dec/issues/18
"""
import itertools

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
N_CLUSTERS, IN_DIM, HIDDEN = 5, 32, 8


class ClusterAssignment(nn.Module):
    def __init__(self, cluster_number, embedding_dimension, alpha=1.0):
        super().__init__()
        self.cluster_number, self.alpha = cluster_number, alpha
        initial = torch.zeros(cluster_number, embedding_dimension)
        nn.init.xavier_uniform_(initial)
        self.cluster_centers = nn.Parameter(initial)

    def forward(self, batch):
        dist2 = ((batch.unsqueeze(1) - self.cluster_centers) ** 2).sum(2)
        numerator = (1.0 / (1.0 + dist2 / self.alpha)) ** ((self.alpha + 1) / 2)
        return numerator / numerator.sum(1, keepdim=True)


class DEC(nn.Module):
    def __init__(self, cluster_number, hidden_dimension, encoder, alpha=1.0):
        super().__init__()
        self.encoder, self.cluster_number = encoder, cluster_number
        self.assignment = ClusterAssignment(cluster_number, hidden_dimension, alpha)

    def forward(self, batch):
        return self.assignment(self.encoder(batch))


def target_distribution(q):
    weight = q ** 2 / q.sum(0)
    return weight / weight.sum(1, keepdim=True)


def kmeans(x, k, iters=30, seed=0):
    g = torch.Generator().manual_seed(seed)
    centres = x[torch.randperm(len(x), generator=g)[:k]].clone()
    for _ in range(iters):
        labels = torch.cdist(x, centres).argmin(1)
        for j in range(k):
            if (labels == j).any():
                centres[j] = x[labels == j].mean(0)
    return labels, centres


def cluster_accuracy(pred, actual, k):
    best = 0.0
    for perm in itertools.permutations(range(k)):
        best = max(best, float((torch.tensor(perm)[pred] == actual).float().mean()))
    return best


def predict(dataset, model, batch_size=1024):
    model.eval()
    with torch.no_grad():
        outs = [(model(x).argmax(1), y) for x, y in DataLoader(dataset, batch_size=batch_size)]
    return torch.cat([o[0] for o in outs]), torch.cat([o[1] for o in outs])


def train(dataset, model, epochs, batch_size, optimizer, update_freq=10):
    static_loader = DataLoader(dataset, batch_size=batch_size, shuffle=False)
    train_loader = DataLoader(dataset, batch_size=batch_size, shuffle=True,
                              generator=torch.Generator().manual_seed(1))
    model.train()
    with torch.no_grad():
        features = torch.cat([model.encoder(x) for x, _ in static_loader])
    actual = torch.cat([y for _, y in static_loader])
    predicted, centres = kmeans(features, model.cluster_number)
    print("k-means accuracy %.4f" % cluster_accuracy(predicted, actual, model.cluster_number))
    model.assignment.cluster_centers = nn.Parameter(centres)
    loss_function = nn.KLDivLoss(reduction="sum")
    for epoch in range(epochs):
        model.train()
        for index, (batch, _) in enumerate(train_loader):
            output = model(batch)
            target = target_distribution(output).detach()
            loss = loss_function(output.log(), target) / output.shape[0]
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if index % update_freq == 0:
                last_loss = loss.item()
        predicted, actual = predict(dataset, model)
        print("epoch %d | loss %.6f | acc %.4f" % (epoch, last_loss,
                                                   cluster_accuracy(predicted, actual, model.cluster_number)))


def blobs(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    means = 0.9 * torch.randn(N_CLUSTERS, IN_DIM, generator=torch.Generator().manual_seed(7))
    labels = torch.randint(0, N_CLUSTERS, (n,), generator=g)
    x = means[labels] + 1.6 * torch.randn(n, IN_DIM, generator=g)
    return TensorDataset((x - x.mean(0)) / x.std(0), labels)


def pretrained_encoder(dataset):
    # stands in for the pretrained autoencoder: a linear autoencoder's optimum, in closed form (PCA)
    x = dataset.tensors[0]
    mean = x.mean(0)
    _, _, vt = torch.linalg.svd(x - mean, full_matrices=False)
    encoder = nn.Linear(IN_DIM, HIDDEN)
    with torch.no_grad():
        encoder.weight.copy_(vt[:HIDDEN])
        encoder.bias.copy_(-vt[:HIDDEN] @ mean)
    return encoder


def main():
    ds_train = blobs(2560)
    encoder = pretrained_encoder(ds_train)
    model = DEC(cluster_number=N_CLUSTERS, hidden_dimension=HIDDEN, encoder=encoder)
    dec_optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    train(dataset=ds_train, model=model, epochs=8, batch_size=256, optimizer=dec_optimizer)
    predicted, actual = predict(ds_train, model)
    print("Final DEC accuracy: %.4f" % cluster_accuracy(predicted, actual, N_CLUSTERS))


if __name__ == "__main__":
    main()
