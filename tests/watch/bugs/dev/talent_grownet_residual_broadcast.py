"""A gradient-boosted ensemble of shallow networks (GrowNet style) inside a tabular benchmark's
method class: a DynamicNet holds the weak learners and a learnable boost_rate, and Method.fit() adds
one two-hidden-layer MLP per stage, trains it with AdamW on the current residual (the functional
gradient of the squared error), then runs a corrective step on the whole ensemble and validates.
For regression the ensemble output is reshaped to (B, 1) while the label batch is (B,), so
grad_direction = -(out - y) broadcasts to a (B, B) matrix and MSELoss((B, 1), (B, B)) fits each weak
learner to the batch-mean residual instead of each row's own residual.

Thread: https://github.com/LAMDA-Tabular/TALENT/pull/109
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class MLP_2HL(nn.Module):
    def __init__(self, dim_in, dim_hidden1, dim_hidden2, dim_out, bn=True):
        super().__init__()
        self.in_layer = nn.Linear(dim_in, dim_hidden1)
        self.hidden_layer = nn.Linear(dim_hidden1, dim_hidden2)
        self.out_layer = nn.Linear(dim_hidden2, dim_out)
        self.bn = nn.BatchNorm1d(dim_hidden1) if bn else nn.Identity()
        self.relu = nn.ReLU()

    def forward(self, x, lower_f):
        if lower_f is not None:
            x = torch.cat([x, lower_f], dim=1)
        out = self.relu(self.bn(self.in_layer(x)))
        out = self.hidden_layer(out)
        return out, self.out_layer(self.relu(out)).squeeze()

    @classmethod
    def get_model(cls, stage, opt):
        dim_in = opt["feat_d"] if stage == 0 else opt["feat_d"] + opt["hidden_d"]
        return cls(dim_in, opt["hidden_d"], opt["hidden_d"], opt["dim_out"])


class DynamicNet(nn.Module):
    def __init__(self, c0, lr):
        super().__init__()
        self.models = nn.ModuleList()
        self.c0 = c0
        self.boost_rate = nn.Parameter(torch.tensor(lr))

    def add(self, model):
        self.models.append(model)

    def to_train(self):
        for m in self.models:
            m.train()

    def to_eval(self):
        for m in self.models:
            m.eval()

    def forward(self, x):
        if len(self.models) == 0:
            return None, torch.full((x.size(0),), self.c0)
        middle_feat_cum, prediction = None, None
        with torch.no_grad():
            for m in self.models:
                middle_feat_cum, pred = m(x, middle_feat_cum)
                prediction = pred if prediction is None else prediction + pred
        return middle_feat_cum, self.c0 + self.boost_rate * prediction

    def forward_grad(self, x):
        middle_feat_cum, prediction = None, None
        for m in self.models:
            middle_feat_cum, pred = m(x, middle_feat_cum)
            prediction = pred if prediction is None else prediction + pred
        return middle_feat_cum, self.c0 + self.boost_rate * prediction


class GrowNetMethod:
    def __init__(self, config):
        self.config = config
        self.loss_f1 = nn.MSELoss()
        self.loss_f2 = nn.MSELoss()

    def fit(self, train_set, val_set):
        cfg = self.config
        self.train_loader = DataLoader(train_set, batch_size=cfg["batch_size"], shuffle=True,
                                       generator=torch.Generator().manual_seed(0))
        self.val_set = val_set
        self.model = DynamicNet(c0=train_set.tensors[1].mean().item(), lr=cfg["boost_rate"])
        sub_cfg = {"feat_d": train_set.tensors[0].shape[1], "hidden_d": cfg["hidden_d"], "dim_out": 1}
        lr, wd = cfg["lr"], cfg["weight_decay"]
        for s in range(cfg["num_nets"]):
            m = MLP_2HL.get_model(s, sub_cfg)
            self.optimizer = torch.optim.AdamW(m.parameters(), lr=lr, weight_decay=wd)
            self.model.to_train()
            for epoch in range(cfg["epochs_per_stage"]):
                for X, y in self.train_loader:
                    middle_feat, out = self.model.forward(X)
                    out = out.view(-1, 1)
                    grad_direction = -(out - y)
                    _, out = m(X, middle_feat)
                    out = out.view(-1, 1)
                    loss = self.loss_f1(self.model.boost_rate * out, grad_direction)
                    m.zero_grad()
                    loss.backward()
                    self.optimizer.step()
            self.model.add(m)
            if s > 0:
                self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr / cfg["lr_scaler"],
                                                   weight_decay=wd)
                for e in range(cfg["correct_epoch"]):
                    for X, y in self.train_loader:
                        _, out = self.model.forward_grad(X)
                        loss = self.loss_f2(out, y)
                        self.optimizer.zero_grad()
                        loss.backward()
                        self.optimizer.step()
                    print(f"Corrected epoch {e} done with loss {loss.item():.4f} for stage {s}")
            self.validate(s)

    def validate(self, stage):
        self.model.to_eval()
        X, y = self.val_set.tensors
        with torch.no_grad():
            _, pred = self.model.forward(X)
        rmse = (pred - y).pow(2).mean().sqrt().item()
        print(f"stage {stage}, val rmse={rmse:.4f} (std of target {y.std().item():.4f})")
        self.model.to_train()


def make_tabular_regression(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    y = torch.sin(2 * x[:, 0]) + x[:, 1] * x[:, 2] + 0.5 * x[:, 3] ** 2 - x[:, 4] + 0.1 * torch.randn(n, generator=g)
    return TensorDataset(x, (y - y.mean()) / y.std())


if __name__ == "__main__":
    torch.manual_seed(0)
    config = {"batch_size": 128, "boost_rate": 1.0, "hidden_d": 32, "lr": 5e-3, "weight_decay": 1e-4,
              "num_nets": 4, "epochs_per_stage": 2, "correct_epoch": 1, "lr_scaler": 2}
    GrowNetMethod(config).fit(make_tabular_regression(1024, 1), make_tabular_regression(512, 2))
