"""An online continual-learning run in the style of a CL library template: strategy.train(stream)
calls self.model.train() once and then, for every sub-experience of the online stream, runs
before_training_exp / _train_exp (one pass of minibatches, plugins hooked before backward) /
after_training_exp. An online-EWC plugin adds its penalty before backward and, after each
sub-experience, computes the parameter importances with model.eval() so the extra forward passes
leave BatchNorm alone, but never switches the model back. Every sub-experience after the first is
therefore trained in eval mode: dropout is off and BatchNorm normalizes with frozen running stats.

Thread: https://github.com/ContinualAI/avalanche/pull/1409
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class EWCPlugin:
    def __init__(self, ewc_lambda=5.0, decay_factor=0.5):
        self.ewc_lambda, self.decay_factor = ewc_lambda, decay_factor
        self.saved_params, self.importances = None, None

    def before_backward(self, strategy):
        if self.importances is None:
            return
        penalty = torch.zeros(())
        for k, p in strategy.model.named_parameters():
            penalty = penalty + (self.importances[k] * (p - self.saved_params[k]).pow(2)).sum()
        strategy.loss = strategy.loss + self.ewc_lambda * penalty

    def after_training_exp(self, strategy):
        imps = self.compute_importances(strategy.model, strategy.optimizer, strategy.experience)
        if self.importances is None:
            self.importances = imps
        else:
            self.importances = {k: self.decay_factor * self.importances[k] + imps[k] for k in imps}
        self.saved_params = {k: p.detach().clone() for k, p in strategy.model.named_parameters()}

    def compute_importances(self, model, optimizer, dataset):
        model.eval()
        imps = {k: torch.zeros_like(p) for k, p in model.named_parameters()}
        loader = DataLoader(dataset, batch_size=32)
        for x, y in loader:
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            for k, p in model.named_parameters():
                imps[k] += p.grad.detach().pow(2)
        return {k: v / len(loader) for k, v in imps.items()}


class OnlineNaive:
    def __init__(self, model, optimizer, train_mb_size=32, plugins=()):
        self.model, self.optimizer, self.train_mb_size, self.plugins = model, optimizer, train_mb_size, plugins
        self.step = 0

    def train(self, experiences):
        self.model.train()
        for self.experience in experiences:
            self._train_exp(self.experience)
            for p in self.plugins:
                p.after_training_exp(self)

    def _train_exp(self, experience):
        g = torch.Generator().manual_seed(self.step)
        for x, y in DataLoader(experience, batch_size=self.train_mb_size, shuffle=True, generator=g):
            self.optimizer.zero_grad()
            self.loss = F.cross_entropy(self.model(x), y)
            for p in self.plugins:
                p.before_backward(self)
            self.loss.backward()
            self.optimizer.step()
            self.step += 1
        print(f"step {self.step} loss {self.loss.item():.4f} model.training={self.model.training}")


def split_online(dataset, size):
    x, y = dataset.tensors
    return [TensorDataset(x[i:i + size], y[i:i + size]) for i in range(0, len(y), size)]


def main():
    g = torch.Generator().manual_seed(0)
    protos = torch.randn(10, 40, generator=g)
    stream = []
    for e in range(2):
        y = torch.randint(5 * e, 5 * e + 5, (1280,), generator=g)
        x = (1 + e) * (protos[y] + torch.randn(1280, 40, generator=g)) + 0.5 * e
        stream += split_online(TensorDataset(x, y), size=128)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(40, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Dropout(0.3),
                          nn.Linear(128, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Dropout(0.3),
                          nn.Linear(128, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    strategy = OnlineNaive(model, optimizer, train_mb_size=32, plugins=[EWCPlugin()])
    strategy.train(stream)


if __name__ == "__main__":
    main()
