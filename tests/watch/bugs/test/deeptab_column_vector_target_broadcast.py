"""An sklearn-style tabular regressor on top of Lightning-like pieces: fit(X, y) fits a feature
preprocessor, a TabularDataModule splits train/validation and its setup("fit") turns features and
labels into tensors of a TabularDataset, a TaskModel wraps the MLP estimator with compute_loss /
training_step / validation_step (nn.MSELoss for regression), and a small Trainer runs Adam.

The user passes the target as a column vector, y of shape (n, 1), which the fit() docstring allows.
setup() adds a dimension to the label tensor without flattening it first, so each batch of labels
is (B, 1, 1) against predictions of shape (B, 1). MSELoss broadcasts the pair to (B, B, 1) and
scores every prediction against every target of the batch: the model learns to predict the batch
mean, the loss settles at the target variance and R2 on held-out data stays near 0.

Thread: https://github.com/OpenTabular/DeepTab/issues/441
"""
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Preprocessor:
    def fit(self, X):
        self.mean_ = X.mean(0)
        self.std_ = X.std(0) + 1e-8
        return self

    def transform(self, X):
        Z = (X - self.mean_) / self.std_
        return {f"num_{j}": Z[:, j:j + 1] for j in range(Z.shape[1])}


class TabularDataset(Dataset):
    def __init__(self, cat_features_list, num_features_list, labels=None):
        self.cat_features_list = cat_features_list
        self.num_features_list = num_features_list
        self.labels = labels

    def __len__(self):
        return len(self.num_features_list[0])

    def __getitem__(self, idx):
        cat = [t[idx] for t in self.cat_features_list]
        num = [t[idx] for t in self.num_features_list]
        if self.labels is None:
            return (cat, num)
        return (cat, num), self.labels[idx]


class TabularDataModule:
    def __init__(self, preprocessor, batch_size, shuffle, regression, val_size=0.2, random_state=101):
        self.preprocessor = preprocessor
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.regression = regression
        self.val_size = val_size
        self.random_state = random_state

    def preprocess_data(self, X_train, y_train):
        rng = np.random.default_rng(self.random_state)
        perm = rng.permutation(len(X_train))
        n_val = int(len(X_train) * self.val_size)
        val_idx, tr_idx = perm[:n_val], perm[n_val:]
        self.X_train, self.y_train = X_train[tr_idx], y_train[tr_idx]
        self.X_val, self.y_val = X_train[val_idx], y_train[val_idx]
        self.preprocessor.fit(self.X_train)

    def _num_tensors(self, X):
        data = self.preprocessor.transform(X)
        return [torch.tensor(v, dtype=torch.float32) for k, v in data.items() if k.startswith("num_")]

    def setup(self, stage):
        if stage == "fit":
            train_num = self._num_tensors(self.X_train)
            val_num = self._num_tensors(self.X_val)
            if self.regression:
                # regression labels: float32, shape (batch_size, 1)
                train_labels = torch.tensor(self.y_train, dtype=torch.float32).unsqueeze(dim=1)
                val_labels = torch.tensor(self.y_val, dtype=torch.float32).unsqueeze(dim=1)
            else:
                train_labels = torch.tensor(self.y_train, dtype=torch.long).view(-1)
                val_labels = torch.tensor(self.y_val, dtype=torch.long).view(-1)
            self.train_dataset = TabularDataset([], train_num, train_labels)
            self.val_dataset = TabularDataset([], val_num, val_labels)

    def train_dataloader(self):
        return DataLoader(self.train_dataset, batch_size=self.batch_size, shuffle=self.shuffle,
                          generator=torch.Generator().manual_seed(self.random_state))

    def val_dataloader(self):
        return DataLoader(self.val_dataset, batch_size=self.batch_size)

    def preprocess_new_data(self, X):
        return TabularDataset([], self._num_tensors(X))


class MLP(nn.Module):
    def __init__(self, n_num_features, num_classes=1, layer_sizes=(64, 32)):
        super().__init__()
        layers, d = [], n_num_features
        for h in layer_sizes:
            layers += [nn.Linear(d, h), nn.ReLU()]
            d = h
        layers.append(nn.Linear(d, num_classes))
        self.layers = nn.Sequential(*layers)

    def forward(self, cat_features, num_features):
        x = torch.cat(num_features, dim=1)
        return self.layers(x)


class TaskModel(nn.Module):
    def __init__(self, estimator, num_classes=1, lr=1e-3, loss_fct=None):
        super().__init__()
        self.estimator = estimator
        self.lr = lr
        self.loss_fct = loss_fct
        if num_classes == 1 and not self.loss_fct:
            self.loss_fct = nn.MSELoss()

    def forward(self, cat_features, num_features):
        return self.estimator(cat_features, num_features)

    def compute_loss(self, predictions, y_true):
        return self.loss_fct(predictions, y_true)

    def training_step(self, batch, batch_idx):
        data, labels = batch
        preds = self(*data)
        return self.compute_loss(preds, labels)

    def validation_step(self, batch, batch_idx):
        data, labels = batch
        preds = self(*data)
        return self.compute_loss(preds, labels)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)


class Trainer:
    def __init__(self, max_epochs):
        self.max_epochs = max_epochs

    def fit(self, task_model, datamodule):
        datamodule.setup("fit")
        optimizer = task_model.configure_optimizers()
        for epoch in range(self.max_epochs):
            task_model.train()
            for batch_idx, batch in enumerate(datamodule.train_dataloader()):
                loss = task_model.training_step(batch, batch_idx)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            task_model.eval()
            with torch.no_grad():
                val = [task_model.validation_step(b, i).item() for i, b in enumerate(datamodule.val_dataloader())]
            print(f"epoch {epoch} train_loss {loss.item():.4f} val_loss {np.mean(val):.4f}")


class MLPRegressor:
    def __init__(self, layer_sizes=(64, 32)):
        self.layer_sizes = layer_sizes

    def fit(self, X, y, max_epochs=10, batch_size=64, lr=1e-3):
        """y : array-like, shape (n_samples,) or (n_samples, n_targets)"""
        self.data_module = TabularDataModule(Preprocessor(), batch_size=batch_size, shuffle=True,
                                             regression=True)
        self.data_module.preprocess_data(X, y)
        self.task_model = TaskModel(MLP(X.shape[1], 1, self.layer_sizes), num_classes=1, lr=lr)
        Trainer(max_epochs=max_epochs).fit(self.task_model, self.data_module)
        return self

    def predict(self, X):
        loader = DataLoader(self.data_module.preprocess_new_data(X), batch_size=256)
        self.task_model.eval()
        with torch.no_grad():
            return torch.cat([self.task_model(*batch) for batch in loader]).numpy()

    def score(self, X, y):
        pred = self.predict(X).reshape(-1)
        y = np.asarray(y).reshape(-1)
        return 1 - ((y - pred) ** 2).sum() / ((y - y.mean()) ** 2).sum()


def housing_table(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 8)).astype(np.float32)
    price = 2.0 * X[:, 0] - 1.5 * X[:, 1] + X[:, 2] * X[:, 3] + np.sin(2 * X[:, 4]) + 0.1 * rng.normal(size=n)
    return X, price.astype(np.float32).reshape(-1, 1)  # target column, as df[["price"]].to_numpy()


def main():
    torch.manual_seed(0)
    X, y = housing_table(3000, seed=0)
    X_test, y_test = housing_table(1000, seed=1)
    model = MLPRegressor().fit(X, y, max_epochs=6, batch_size=64, lr=2e-3)
    print(f"test R2 {model.score(X_test, y_test):.3f}")


if __name__ == "__main__":
    main()
