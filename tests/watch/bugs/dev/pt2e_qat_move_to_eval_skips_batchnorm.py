"""Quantization-aware training on a captured graph: the float model is exported into a graph of
ops whose arguments are frozen literals (so model.eval() does not reach them), prepare_qat
inserts weight fake-quantization, a plain loop trains it, and a move_exported_model_to_eval()
helper rewrites the train-only ops before the validation pass. The helper rewrites dropout but
has no pattern for a standalone batch_norm (one not folded into a preceding layer), so that node
keeps training=True: validation normalizes with each test batch's statistics and keeps updating
the running buffers with test data, and the reported QAT accuracy is wrong.

Thread: https://github.com/pytorch/pytorch/pull/115715
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class FloatNet(nn.Module):
    def __init__(self, dim=32, hidden=64, n_classes=8):
        super().__init__()
        self.fc1, self.bn1 = nn.Linear(dim, hidden), nn.BatchNorm1d(hidden)
        self.fc2, self.fc3 = nn.Linear(hidden, hidden), nn.Linear(hidden, n_classes)


class FakeQuant(torch.autograd.Function):
    @staticmethod
    def forward(ctx, w, bits=8):
        scale = w.detach().abs().max().clamp(min=1e-8) / (2 ** (bits - 1) - 1)
        return torch.round(w / scale).clamp(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) * scale

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class GraphModule(nn.Module):
    def __init__(self, float_model):
        super().__init__()
        self.mods = float_model
        self.nodes = [("linear", "fc1", {}), ("batch_norm", "bn1", {"training": True, "momentum": 0.1}),
                      ("relu", None, {}), ("dropout", None, {"p": 0.2, "training": True}),
                      ("linear", "fc2", {}), ("relu", None, {}), ("linear", "fc3", {})]
        self.fake_quant_weights = False

    def forward(self, x):
        for op, name, kw in self.nodes:
            if op == "linear":
                m = getattr(self.mods, name)
                w = FakeQuant.apply(m.weight) if self.fake_quant_weights else m.weight
                x = F.linear(x, w, m.bias)
            elif op == "batch_norm":
                m = getattr(self.mods, name)
                x = F.batch_norm(x, m.running_mean, m.running_var, m.weight, m.bias, kw["training"], kw["momentum"])
            elif op == "relu":
                x = F.relu(x)
            elif op == "dropout":
                x = F.dropout(x, kw["p"], kw["training"])
        return x


def export_model(model):
    return GraphModule(model)


def prepare_qat(gm):
    gm.fake_quant_weights = True
    return gm


def move_exported_model_to_eval(gm):
    for op, _, kw in gm.nodes:
        if op == "dropout":
            kw["training"] = False
    return gm


def main():
    g = torch.Generator().manual_seed(0)
    protos = torch.randn(8, 32, generator=g)
    y_tr = torch.randint(0, 8, (2560,), generator=g)
    x_tr = protos[y_tr] + 1.2 * torch.randn(2560, 32, generator=g)
    y_te = torch.arange(8).repeat_interleave(100)
    x_te = protos[y_te] + 1.2 * torch.randn(800, 32, generator=g)
    train_loader = DataLoader(TensorDataset(x_tr, y_tr), batch_size=64, shuffle=True,
                              generator=torch.Generator().manual_seed(1))
    val_loader = DataLoader(TensorDataset(x_te, y_te), batch_size=50, shuffle=False)
    torch.manual_seed(0)
    prepared = prepare_qat(export_model(FloatNet()))
    optimizer = torch.optim.SGD(prepared.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(2):
        for x, y in train_loader:
            loss = F.cross_entropy(prepared(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} train loss {loss.item():.4f}")
    move_exported_model_to_eval(prepared)
    correct = 0
    with torch.no_grad():
        for x, y in val_loader:
            correct += (prepared(x).argmax(1) == y).sum().item()
    print(f"QAT top-1 accuracy: {correct / len(y_te):.3f}")


if __name__ == "__main__":
    main()
