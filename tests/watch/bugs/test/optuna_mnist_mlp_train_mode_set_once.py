"""A hyperparameter-search example for digit classification: objective(trial) builds an MLP with
define_model(trial) (Linear, ReLU and Dropout per layer, the layer count, widths and dropout rates
suggested by the trial, LogSoftmax at the end), picks the optimizer class by name with
getattr(optim, name), trains a limited number of batches per epoch with F.nll_loss, and after every
epoch validates under model.eval() / torch.no_grad(), reports the accuracy to the trial and asks it
whether to prune. model.train() is called once, before the epoch loop, so after the first epoch's
validation every later epoch trains in eval mode and the dropout layers the search is tuning are
switched off.

Thread: https://github.com/optuna/optuna/pull/1725
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset

BATCHSIZE = 128
CLASSES = 10
EPOCHS = 10
N_TRAIN_EXAMPLES = BATCHSIZE * 30
N_VALID_EXAMPLES = BATCHSIZE * 10


class PresetTrial:
    """Stands in for a search trial: hands out preset values and records reports."""

    def __init__(self, params):
        self.params = params
        self.reports = {}

    def suggest_int(self, name, low, high):
        return self.params[name]

    def suggest_float(self, name, low, high, log=False):
        return self.params[name]

    def suggest_categorical(self, name, choices):
        return self.params[name]

    def report(self, value, step):
        self.reports[step] = value

    def should_prune(self):
        return False


def define_model(trial):
    n_layers = trial.suggest_int("n_layers", 1, 3)
    layers = []
    in_features = 28 * 28
    for i in range(n_layers):
        out_features = trial.suggest_int(f"n_units_l{i}", 4, 128)
        layers.append(nn.Linear(in_features, out_features))
        layers.append(nn.ReLU())
        p = trial.suggest_float(f"dropout_l{i}", 0.2, 0.5)
        layers.append(nn.Dropout(p))
        in_features = out_features
    layers.append(nn.Linear(in_features, CLASSES))
    layers.append(nn.LogSoftmax(dim=1))
    return nn.Sequential(*layers)


def make_digits(n, seed):
    """28x28 images in [0, 1]: a blurred class template plus pixel noise."""
    templates = torch.rand(CLASSES, 28 * 28, generator=torch.Generator().manual_seed(123))
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, CLASSES, (n,), generator=g)
    x = 0.25 * templates[y] + 0.75 * torch.rand(n, 28 * 28, generator=g)
    return x.view(n, 1, 28, 28).clamp(0, 1), y


def get_digits():
    x_train, y_train = make_digits(6000, seed=1)
    x_valid, y_valid = make_digits(2000, seed=2)
    train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=BATCHSIZE, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    valid_loader = DataLoader(TensorDataset(x_valid, y_valid), batch_size=BATCHSIZE, shuffle=True,
                              generator=torch.Generator().manual_seed(1))
    return train_loader, valid_loader


def objective(trial):
    model = define_model(trial)
    optimizer_name = trial.suggest_categorical("optimizer", ["Adam", "RMSprop", "SGD"])
    lr = trial.suggest_float("lr", 1e-5, 1e-1, log=True)
    optimizer = getattr(optim, optimizer_name)(model.parameters(), lr=lr)
    train_loader, valid_loader = get_digits()

    model.train()
    for epoch in range(EPOCHS):
        for batch_idx, (data, target) in enumerate(train_loader):
            if batch_idx * BATCHSIZE >= N_TRAIN_EXAMPLES:
                break
            data = data.view(data.size(0), -1)
            optimizer.zero_grad()
            output = model(data)
            loss = F.nll_loss(output, target)
            loss.backward()
            optimizer.step()

        model.eval()
        correct = 0
        with torch.no_grad():
            for batch_idx, (data, target) in enumerate(valid_loader):
                if batch_idx * BATCHSIZE >= N_VALID_EXAMPLES:
                    break
                output = model(data.view(data.size(0), -1))
                pred = output.argmax(dim=1, keepdim=True)
                correct += pred.eq(target.view_as(pred)).sum().item()
        accuracy = correct / min(len(valid_loader.dataset), N_VALID_EXAMPLES)
        print(f"epoch {epoch} last train loss {loss.item():.4f} valid accuracy {accuracy:.3f}")

        trial.report(accuracy, epoch)
        if trial.should_prune():
            raise RuntimeError("trial pruned")
    return accuracy


def main():
    torch.manual_seed(0)
    trial = PresetTrial({"n_layers": 2, "n_units_l0": 96, "dropout_l0": 0.4, "n_units_l1": 64,
                         "dropout_l1": 0.3, "optimizer": "Adam", "lr": 3e-3})
    value = objective(trial)
    print(f"trial value {value:.3f}")


if __name__ == "__main__":
    main()
