"""An outlier-detection library's Deep SVDD detector: a DeepSVDD estimator class with a scikit-learn
style fit(X) / decision_function(X), a contamination-based threshold and a dict mapping optimizer
names to torch.optim classes, around an inner nn.Module that builds a bias-free nn.Sequential
(Linear/ReLU/Dropout with a named 'net_output' layer) and sets the hypersphere centre c from a
forward hook on the first pass over the standardised data. fit() builds the optimizer with
weight_decay=l2_regularizer, and each epoch loops over a shuffled DataLoader: zero_grad, forward,
squared distance to c, a small weight-norm penalty, then optimizer.step(), printing the summed epoch
loss. The loss.backward() call in that loop is commented out, so no gradient ever reaches the
weights, the step does nothing and the anomaly scores come from the randomly initialised network.

Thread: https://github.com/yzhao062/pyod/pull/704
"""
import numpy as np
import torch
import torch.optim as optim
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

optimizer_dict = {"sgd": optim.SGD, "adam": optim.Adam, "rmsprop": optim.RMSprop, "adamw": optim.AdamW}


def roc_auc(labels, scores):
    order = np.argsort(scores)
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    n_pos, n_neg = labels.sum(), (1 - labels).sum()
    return (ranks[labels == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


class InnerSVDDNet(nn.Module):
    def __init__(self, n_features, hidden_neurons=(64, 32), dropout_rate=0.2):
        super().__init__()
        self.hidden_neurons = list(hidden_neurons)
        self.net = nn.Sequential()
        self.net.add_module("input_layer", nn.Linear(n_features, self.hidden_neurons[0], bias=False))
        self.net.add_module("act_0", nn.ReLU())
        self.net.add_module("drop_0", nn.Dropout(dropout_rate))
        self.net.add_module("net_output", nn.Linear(self.hidden_neurons[0], self.hidden_neurons[1], bias=False))
        self.net.add_module("act_out", nn.ReLU())
        self.register_buffer("c", torch.zeros(self.hidden_neurons[1]))

    def init_center(self, x, eps=0.1):
        captured = {}
        handle = self.net.net_output.register_forward_hook(lambda m, i, o: captured.setdefault("out", o))
        with torch.no_grad():
            self.net(x)
        handle.remove()
        c = captured["out"].mean(0)
        c[(c.abs() < eps) & (c < 0)] = -eps
        c[(c.abs() < eps) & (c >= 0)] = eps
        self.c.copy_(c)

    def forward(self, x):
        return self.net(x)


class DeepSVDDDetector:
    def __init__(self, hidden_neurons=(64, 32), optimizer="adam", epochs=6, batch_size=32,
                 dropout_rate=0.2, l2_regularizer=0.1, contamination=0.1, random_state=0):
        self.hidden_neurons = hidden_neurons
        self.optimizer = optimizer
        self.epochs = epochs
        self.batch_size = batch_size
        self.dropout_rate = dropout_rate
        self.l2_regularizer = l2_regularizer
        self.contamination = contamination
        torch.manual_seed(random_state)

    def _standardize(self, X):
        return torch.tensor((X - self.mean_) / self.std_, dtype=torch.float32)

    def fit(self, X):
        self.mean_, self.std_ = X.mean(0), X.std(0) + 1e-8
        X_norm = self._standardize(X)
        self.model_ = InnerSVDDNet(X.shape[1], self.hidden_neurons, self.dropout_rate)
        self.model_.init_center(X_norm)
        loader = DataLoader(TensorDataset(X_norm, X_norm), batch_size=self.batch_size, shuffle=True,
                            generator=torch.Generator().manual_seed(0))
        optimizer = optimizer_dict[self.optimizer](self.model_.parameters(), weight_decay=self.l2_regularizer)
        for epoch in range(self.epochs):
            self.model_.train()
            epoch_loss = 0.0
            for batch_x, _ in loader:
                optimizer.zero_grad()
                outputs = self.model_(batch_x)
                dist = torch.sum((outputs - self.model_.c) ** 2, dim=-1)
                w_d = 1e-6 * sum(torch.linalg.norm(w) for w in self.model_.parameters())
                loss = torch.mean(dist) + w_d
                # loss.backward()
                optimizer.step()
                epoch_loss += loss.item()
            print(f"Epoch {epoch + 1}/{self.epochs}, Loss: {epoch_loss:.4f}")
        self.decision_scores_ = self.decision_function(X)
        self.threshold_ = np.percentile(self.decision_scores_, 100 * (1 - self.contamination))
        return self

    def decision_function(self, X):
        self.model_.eval()
        with torch.no_grad():
            out = self.model_(self._standardize(X))
            return torch.sum((out - self.model_.c) ** 2, dim=-1).numpy()


def generate_data(n_train, n_test, n_features, contamination, seed):
    """Inliers on a low-dimensional correlated manifold, outliers spread off it."""
    rng = np.random.default_rng(seed)
    basis = rng.normal(size=(3, n_features))

    def draw(n):
        n_out = int(n * contamination)
        inl = rng.normal(size=(n - n_out, 3)) @ basis + 0.3 * rng.normal(size=(n - n_out, n_features))
        out = rng.uniform(-6, 6, size=(n_out, n_features))
        return np.vstack([inl, out]).astype(np.float32), np.r_[np.zeros(n - n_out), np.ones(n_out)]

    return (*draw(n_train), *draw(n_test))


if __name__ == "__main__":
    X_train, y_train, X_test, y_test = generate_data(2000, 500, 10, 0.1, seed=42)
    clf = DeepSVDDDetector(epochs=6)
    clf.fit(X_train)
    scores = clf.decision_function(X_test)
    print(f"train ROC {roc_auc(y_train, clf.decision_scores_):.4f}, test ROC {roc_auc(y_test, scores):.4f}")
