"""A continual-learning strategy in the style of a CL library: BaseStrategy.train(experiences,
eval_streams) runs train_exp per experience (dataset, model_adaptation, make_optimizer, epochs of
training_epoch) and calls _periodic_eval after every epoch. A user strategy overrides
model_adaptation to freeze the BatchNorm layers (eval mode, no grad) from the second experience on.
_periodic_eval evaluates the streams and then restores training with a blanket self.model.train(),
which flips the frozen BatchNorm layers back to training mode, so their running statistics keep
being overwritten by each new experience's data.

Thread: https://github.com/ContinualAI/avalanche/pull/772
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class MLP(nn.Module):
    def __init__(self, dim_in=32, hidden=64, n_classes=6):
        super().__init__()
        self.features = nn.Sequential(
            nn.Linear(dim_in, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
        )
        self.classifier = nn.Linear(hidden, n_classes)

    def forward(self, x):
        return self.classifier(self.features(x))


class BaseStrategy:
    def __init__(self, model, criterion, lr=0.05, train_mb_size=32, train_epochs=3, eval_every=1):
        self.model, self._criterion, self.lr = model, criterion, lr
        self.train_mb_size, self.train_epochs, self.eval_every = train_mb_size, train_epochs, eval_every
        self.training_exp_counter = 0
        self.optimizer = None

    def train(self, experiences, eval_streams):
        self.model.train()
        for exp_id, experience in enumerate(experiences):
            self.training_exp_counter = exp_id
            self.train_exp(experience, eval_streams)
            self.training_exp_counter += 1

    def train_exp(self, experience, eval_streams):
        self.model.train()
        g = torch.Generator().manual_seed(100 + self.training_exp_counter)
        self.dataloader = DataLoader(experience, batch_size=self.train_mb_size, shuffle=True, generator=g)
        self.model_adaptation()
        self.make_optimizer()
        for epoch in range(self.train_epochs):
            self.training_epoch()
            self._periodic_eval(eval_streams, epoch)

    def model_adaptation(self):
        pass

    def make_optimizer(self):
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.SGD(params, lr=self.lr, momentum=0.9)

    def training_epoch(self):
        for x, y in self.dataloader:
            self.optimizer.zero_grad()
            self.loss = self._criterion(self.model(x), y)
            self.loss.backward()
            self.optimizer.step()

    @torch.no_grad()
    def eval(self, stream):
        self.model.eval()
        accs = []
        for exp in stream:
            x, y = exp.tensors
            accs.append((self.model(x).argmax(1) == y).float().mean().item())
        return accs

    def _periodic_eval(self, eval_streams, epoch):
        if self.eval_every > 0 and (epoch + 1) % self.eval_every == 0:
            for stream in eval_streams:
                accs = self.eval(stream)
                print(f"exp {self.training_exp_counter} epoch {epoch} loss {self.loss.item():.3f} "
                      f"acc per exp {[round(a, 3) for a in accs]}")
        self.model.train()


class FrozenBNNaive(BaseStrategy):
    def model_adaptation(self):
        if self.training_exp_counter == 0:
            return
        for m in self.model.modules():
            if isinstance(m, nn.BatchNorm1d):
                m.eval()
                for p in m.parameters():
                    p.requires_grad = False


def make_stream(g, n_exp=3, n_per_exp=512, dim=32, n_classes=6):
    protos = torch.randn(n_classes, dim, generator=g)
    train, test = [], []
    for e in range(n_exp):
        shift = 1.5 * torch.randn(dim, generator=g)
        scale = 1.0 + 0.5 * e
        classes = torch.tensor([2 * e, 2 * e + 1])
        for store, n in ((train, n_per_exp), (test, 200)):
            y = classes[torch.randint(0, 2, (n,), generator=g)]
            x = scale * (protos[y] + 0.8 * torch.randn(n, dim, generator=g)) + shift
            store.append(TensorDataset(x, y))
    return train, test


def main():
    g = torch.Generator().manual_seed(0)
    train_stream, test_stream = make_stream(g)
    torch.manual_seed(0)
    model = MLP()
    strategy = FrozenBNNaive(model, nn.CrossEntropyLoss(), lr=0.05, train_mb_size=32, train_epochs=3)
    strategy.train(train_stream, eval_streams=[test_stream])
    bn = model.features[1]
    print(f"first BN training flag at the end: {bn.training}, batches tracked: {int(bn.num_batches_tracked)}")


if __name__ == "__main__":
    main()
