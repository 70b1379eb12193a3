"""Quantization-aware training with learned step sizes (LSQ). A prepare(model) helper swaps every
Conv2d/Linear of a small CNN for a quantized twin that fake-quantizes its weight with a
LSQWeightQuantizer module and its input with a LSQActivationQuantizer module. The quantizers
calibrate their step size `s` from the data during the first `batch_init` forward passes, then the
weight quantizer promotes the calibrated value to an nn.Parameter so that it can be learned. A
trainer() function builds the model, collects the trainable parameters, creates an SGD optimizer
from them and runs a plain epoch/batch loop (zero_grad, forward, loss, backward, step) with a
custom autograd Function that returns a gradient for the step size.

Bug: the weight quantizer's step size only becomes an nn.Parameter inside forward(), after
`batch_init` calibration batches, long after the optimizer was built from
`[p for p in model.parameters() if p.requires_grad]`. The new Parameter gets a gradient on every
backward but it is not in any param group, so optimizer.step() never touches it: the learned step
sizes (the point of LSQ) stay at their calibration value for the whole run. The activation step
size is worse still, a plain tensor that never even receives a gradient.

Thread: https://github.com/ZouJiu1/LSQplus/issues/1
"""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd import Function


class LSQFunction(Function):
    @staticmethod
    def forward(ctx, x, alpha, g, qn, qp):
        ctx.save_for_backward(x, alpha)
        ctx.other = g, qn, qp
        q = torch.clamp(torch.round(x / alpha), qn, qp)
        return q * alpha

    @staticmethod
    def backward(ctx, grad_out):
        x, alpha = ctx.saved_tensors
        g, qn, qp = ctx.other
        q_x = x / alpha
        lower = (q_x < qn).float()
        upper = (q_x > qp).float()
        inside = 1.0 - lower - upper
        grad_alpha = ((lower * qn + upper * qp + inside * (torch.round(q_x) - q_x)) * grad_out * g)
        grad_alpha = grad_alpha.sum().reshape(alpha.shape)
        return inside * grad_out, grad_alpha, None, None, None


class LSQActivationQuantizer(nn.Module):
    def __init__(self, bits, batch_init=20):
        super().__init__()
        self.qn = -(2 ** (bits - 1))
        self.qp = 2 ** (bits - 1) - 1
        self.batch_init = batch_init
        self.init_state = 0

    def forward(self, x):
        if self.init_state == 0:
            self.g = 1.0 / math.sqrt(x.numel() * self.qp)
            self.s = torch.mean(torch.abs(x.detach())) * 2 / math.sqrt(self.qp)
            self.init_state += 1
        return LSQFunction.apply(x, self.s.reshape(1), self.g, self.qn, self.qp)


class LSQWeightQuantizer(nn.Module):
    def __init__(self, bits, batch_init=20):
        super().__init__()
        self.qn = -(2 ** (bits - 1))
        self.qp = 2 ** (bits - 1) - 1
        self.batch_init = batch_init
        self.init_state = 0

    def forward(self, w):
        if self.init_state == 0:
            self.g = 1.0 / math.sqrt(w.numel() * self.qp)
            self.s = torch.mean(torch.abs(w.detach())) * 2 / math.sqrt(self.qp)
            self.init_state += 1
        elif self.init_state < self.batch_init:
            self.s = 0.9 * self.s + 0.1 * torch.mean(torch.abs(w.detach())) * 2 / math.sqrt(self.qp)
            self.init_state += 1
        elif self.init_state == self.batch_init:
            self.s = nn.Parameter(self.s.reshape(1))
            self.init_state += 1
        return LSQFunction.apply(w, self.s.reshape(1), self.g, self.qn, self.qp)


class QuantConv2d(nn.Conv2d):
    def __init__(self, *args, bits=4, batch_init=20, **kwargs):
        super().__init__(*args, **kwargs)
        self.act_quant = LSQActivationQuantizer(bits, batch_init)
        self.weight_quant = LSQWeightQuantizer(bits, batch_init)

    def forward(self, x):
        return F.conv2d(self.act_quant(x), self.weight_quant(self.weight), self.bias,
                        self.stride, self.padding)


class QuantLinear(nn.Linear):
    def __init__(self, *args, bits=4, batch_init=20, **kwargs):
        super().__init__(*args, **kwargs)
        self.act_quant = LSQActivationQuantizer(bits, batch_init)
        self.weight_quant = LSQWeightQuantizer(bits, batch_init)

    def forward(self, x):
        return F.linear(self.act_quant(x), self.weight_quant(self.weight), self.bias)


def prepare(module, bits=3, batch_init=20):
    for name, child in module.named_children():
        if isinstance(child, nn.Conv2d):
            q = QuantConv2d(child.in_channels, child.out_channels, child.kernel_size,
                            padding=child.padding, bias=child.bias is not None,
                            bits=bits, batch_init=batch_init)
            q.weight.data.copy_(child.weight.data)
            if child.bias is not None:
                q.bias.data.copy_(child.bias.data)
            setattr(module, name, q)
        elif isinstance(child, nn.Linear):
            q = QuantLinear(child.in_features, child.out_features, bits=bits,
                            batch_init=batch_init)
            q.weight.data.copy_(child.weight.data)
            q.bias.data.copy_(child.bias.data)
            setattr(module, name, q)
        else:
            prepare(child, bits, batch_init)
    return module


class SmallNet(nn.Module):
    def __init__(self, num_classes=5):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 12, 3, padding=1)
        self.conv2 = nn.Conv2d(12, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 4 * 4, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def make_data(base, n, g):
    y = torch.randint(0, 5, (n,), generator=g)
    x = base[y] + 1.5 * torch.randn(n, 1, 16, 16, generator=g)
    return x, y


def adjust_lr(optimizer, step):
    lr = 0.05 if step < 80 else 0.01
    for group in optimizer.param_groups:
        group["lr"] = lr
    return lr


def trainer():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    base = torch.randn(5, 1, 16, 16, generator=g)
    x_train, y_train = make_data(base, 1280, g)
    x_test, y_test = make_data(base, 256, g)
    model = prepare(SmallNet(), bits=3, batch_init=20)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=5e-4)
    criterion = nn.CrossEntropyLoss()
    step = 0
    for epoch in range(4):
        model.train()
        perm = torch.randperm(len(x_train), generator=g)
        for i in range(0, len(perm), 40):
            idx = perm[i:i + 40]
            lr = adjust_lr(optimizer, step)
            optimizer.zero_grad()
            out = model(x_train[idx])
            loss = criterion(out, y_train[idx])
            loss.backward()
            optimizer.step()
            step += 1
        model.eval()
        with torch.no_grad():
            acc = (model(x_test).argmax(1) == y_test).float().mean().item()
        print(f"epoch {epoch} step {step} lr {lr} loss {loss.item():.4f} test acc {acc:.3f}")


if __name__ == "__main__":
    trainer()
