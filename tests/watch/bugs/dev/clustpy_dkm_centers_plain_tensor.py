"""A scikit-learn-style deep clustering estimator in the style of ClustPy's Deep k-Means (DKM): DKM(n_clusters,
alphas, ...).fit(X) calls a module-level _dkm() that pretrains a FeedforwardAutoencoder (its own fit() and
fitted flag, loaders yielding [index, sample] batches), encodes the data, runs an initial k-means in the
embedding, builds a _DKM_Module(init_centers, alphas), creates one Adam optimizer over
list(autoencoder.parameters()) + list(dkm_module.parameters()), and calls dkm_module.fit(), which loops over
the alpha values and epochs doing reconstruction loss + cluster_loss_weight * DKM loss (squared distances to
the centres weighted by a softmax over -alpha * distance), zero_grad / backward / step; afterwards labels are
predicted and k-means is run again on the final embedding. _DKM_Module.__init__ stores the centres as
self.centers = torch.tensor(init_centers), a plain tensor: it is not a registered parameter, has no
gradient, and dkm_module.parameters() is empty, so the optimizer only ever trains the autoencoder and the
centres stay at their initial k-means values for the whole clustering phase.

Thread: https://github.com/collinleiber/ClustPy/pull/80
"""
import itertools

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

N_CLUSTERS, IN_DIM = 5, 32


class _IndexedData(Dataset):
    def __init__(self, X):
        self.X = torch.as_tensor(X, dtype=torch.float32)

    def __len__(self):
        return len(self.X)

    def __getitem__(self, i):
        return [i, self.X[i]]


def get_dataloader(X, batch_size, shuffle, seed=0):
    g = torch.Generator().manual_seed(seed) if shuffle else None
    return DataLoader(_IndexedData(X), batch_size=batch_size, shuffle=shuffle, generator=g)


class FeedforwardAutoencoder(torch.nn.Module):
    def __init__(self, layers):
        super().__init__()
        enc, dec = [], []
        for a, b in zip(layers[:-1], layers[1:]):
            enc += [torch.nn.Linear(a, b), torch.nn.LeakyReLU()]
        for a, b in zip(layers[::-1][:-1], layers[::-1][1:]):
            dec += [torch.nn.Linear(a, b), torch.nn.LeakyReLU()]
        self.encoder = torch.nn.Sequential(*enc[:-1])
        self.decoder = torch.nn.Sequential(*dec[:-1])
        self.fitted = False

    def encode(self, x):
        return self.encoder(x)

    def loss(self, batch, loss_fn, device):
        x = batch[1].to(device)
        embedded = self.encode(x)
        reconstructed = self.decoder(embedded)
        return loss_fn(reconstructed, x), embedded, reconstructed

    def fit(self, trainloader, n_epochs, optimizer_params, optimizer_class, loss_fn, device):
        optimizer = optimizer_class(self.parameters(), **optimizer_params)
        for _ in range(n_epochs):
            for batch in trainloader:
                loss, _, _ = self.loss(batch, loss_fn, device)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        self.fitted = True
        return self


def get_trained_autoencoder(trainloader, optimizer_params, n_epochs, device, optimizer_class, loss_fn,
                            embedding_size, autoencoder=None):
    if autoencoder is None:
        autoencoder = FeedforwardAutoencoder([IN_DIM, 128, 64, embedding_size])
    if not autoencoder.fitted:
        autoencoder.fit(trainloader, n_epochs, optimizer_params, optimizer_class, loss_fn, device)
    return autoencoder


def encode_batchwise(loader, autoencoder, device):
    with torch.no_grad():
        return torch.cat([autoencoder.encode(b[1].to(device)) for b in loader]).cpu().numpy()


def run_initial_clustering(embedded, n_clusters, seed=0, iters=30):
    x = torch.as_tensor(embedded)
    g = torch.Generator().manual_seed(seed)
    centers = x[torch.randperm(len(x), generator=g)[:n_clusters]].clone()
    for _ in range(iters):
        labels = torch.cdist(x, centers).argmin(1)
        for j in range(n_clusters):
            if (labels == j).any():
                centers[j] = x[labels == j].mean(0)
    return labels.numpy(), centers.numpy()


def squared_euclidean_distance(t1, t2):
    return ((t1.unsqueeze(1) - t2.unsqueeze(0)) ** 2).sum(2)


def _dkm_get_probs(squared_diffs, alpha):
    shifted = squared_diffs - squared_diffs.min(1)[0].reshape((-1, 1))
    exponent = torch.exp(-alpha * shifted)
    return exponent / exponent.sum(1).reshape((-1, 1))


class _DKM_Module(torch.nn.Module):
    def __init__(self, init_centers, alphas):
        super().__init__()
        self.alphas = alphas
        self.centers = torch.tensor(init_centers)

    def to_device(self, device):
        self.centers = self.centers.to(device)
        self.to(device)
        return self

    def predict_hard(self, embedded, alpha=1000):
        return _dkm_get_probs(squared_euclidean_distance(embedded, self.centers), alpha).argmax(1)

    def dkm_loss(self, embedded, alpha):
        squared_diffs = squared_euclidean_distance(embedded, self.centers)
        probs = _dkm_get_probs(squared_diffs, alpha)
        return (squared_diffs * probs).sum(1).mean()

    def _loss(self, batch, alpha, autoencoder, cluster_loss_weight, loss_fn, device):
        ae_loss, embedded, _ = autoencoder.loss(batch, loss_fn, device)
        return ae_loss + self.dkm_loss(embedded, alpha) * cluster_loss_weight

    def fit(self, autoencoder, trainloader, n_epochs, device, optimizer, loss_fn, cluster_loss_weight):
        for alpha in self.alphas:
            for _ in range(n_epochs):
                for batch in trainloader:
                    loss = self._loss(batch, alpha, autoencoder, cluster_loss_weight, loss_fn, device)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
        return self


def _dkm(X, n_clusters, alphas, batch_size, pretrain_optimizer_params, clustering_optimizer_params,
         pretrain_epochs, clustering_epochs, optimizer_class, loss_fn, autoencoder, embedding_size,
         cluster_loss_weight):
    device = torch.device("cpu")
    trainloader = get_dataloader(X, batch_size, True)
    testloader = get_dataloader(X, batch_size, False)
    autoencoder = get_trained_autoencoder(trainloader, pretrain_optimizer_params, pretrain_epochs, device,
                                          optimizer_class, loss_fn, embedding_size, autoencoder)
    embedded_data = encode_batchwise(testloader, autoencoder, device)
    _, init_centers = run_initial_clustering(embedded_data, n_clusters)
    dkm_module = _DKM_Module(init_centers, alphas).to_device(device)
    optimizer = optimizer_class(list(autoencoder.parameters()) + list(dkm_module.parameters()),
                                **clustering_optimizer_params)
    dkm_module.fit(autoencoder, trainloader, clustering_epochs, device, optimizer, loss_fn, cluster_loss_weight)
    with torch.no_grad():
        dkm_labels = torch.cat([dkm_module.predict_hard(autoencoder.encode(b[1])) for b in testloader]).numpy()
    kmeans_labels, kmeans_centers = run_initial_clustering(encode_batchwise(testloader, autoencoder, device),
                                                           n_clusters)
    return kmeans_labels, kmeans_centers, dkm_labels, dkm_module.centers.detach().cpu().numpy(), autoencoder


def _get_default_alphas(init_alpha=0.1, n_alphas=40):
    alphas = [init_alpha]
    for i in range(2, n_alphas + 1):
        alphas.append(2 ** (1 / np.log(i) ** 2) * alphas[-1])
    return alphas


class DKM:
    def __init__(self, n_clusters, alphas=None, batch_size=256, pretrain_optimizer_params=None,
                 clustering_optimizer_params=None, pretrain_epochs=100, clustering_epochs=5,
                 optimizer_class=torch.optim.Adam, loss_fn=torch.nn.MSELoss(), autoencoder=None,
                 embedding_size=10, cluster_loss_weight=1.0):
        if alphas is None:
            alphas = _get_default_alphas()
        elif type(alphas) is tuple and len(alphas) == 2:
            alphas = _get_default_alphas(init_alpha=alphas[0], n_alphas=alphas[1])
        self.n_clusters, self.alphas, self.batch_size = n_clusters, alphas, batch_size
        self.pretrain_optimizer_params = pretrain_optimizer_params or {"lr": 1e-3}
        self.clustering_optimizer_params = clustering_optimizer_params or {"lr": 1e-4}
        self.pretrain_epochs, self.clustering_epochs = pretrain_epochs, clustering_epochs
        self.optimizer_class, self.loss_fn, self.autoencoder = optimizer_class, loss_fn, autoencoder
        self.embedding_size, self.cluster_loss_weight = embedding_size, cluster_loss_weight

    def fit(self, X):
        out = _dkm(X, self.n_clusters, self.alphas, self.batch_size, self.pretrain_optimizer_params,
                   self.clustering_optimizer_params, self.pretrain_epochs, self.clustering_epochs,
                   self.optimizer_class, self.loss_fn, self.autoencoder, self.embedding_size,
                   self.cluster_loss_weight)
        self.labels_, self.cluster_centers_, self.dkm_labels_, self.dkm_cluster_centers_, self.autoencoder = out
        return self


def unsupervised_accuracy(labels_true, labels_pred, k):
    return max(float(np.mean(np.asarray(perm)[labels_pred] == labels_true))
               for perm in itertools.permutations(range(k)))


def make_blobs(n, seed=0):
    rng = np.random.default_rng(seed)
    means = 1.2 * np.random.default_rng(7).standard_normal((N_CLUSTERS, IN_DIM))
    y = rng.integers(0, N_CLUSTERS, n)
    X = means[y] + rng.standard_normal((n, IN_DIM))
    return ((X - X.mean(0)) / X.std(0)).astype(np.float32), y


if __name__ == "__main__":
    torch.manual_seed(0)
    X, y = make_blobs(2048)
    dkm = DKM(n_clusters=N_CLUSTERS, alphas=(0.1, 3), pretrain_epochs=2, clustering_epochs=3,
              clustering_optimizer_params={"lr": 1e-3}, embedding_size=8)
    dkm.fit(X)
    print("DKM labels accuracy: %.4f" % unsupervised_accuracy(y, dkm.dkm_labels_, N_CLUSTERS))
    print("k-means after DKM accuracy: %.4f" % unsupervised_accuracy(y, dkm.labels_, N_CLUSTERS))
