"""
Shape: tutorial script; make_net() assembles a torch.nn.Sequential with add_module calls, train(model, loss, optimizer, x, y) helper does one minibatch step via model.forward / loss.forward, main() slices tensors into batches.
Bug: the Sequential ends in a torch.nn.Softmax() module and its output goes to torch.nn.CrossEntropyLoss, which applies log-softmax again.
Thread: https://github.com/vinhkhuc/PyTorch-Mini-Tutorials/issues/1
"""
import numpy as np
import torch
from torch import optim
import torch.autograd as autograd

from data_util import load_mnist


def make_net(n_in, n_out):
    model = torch.nn.Sequential()
    model.add_module("fc_a", torch.nn.Linear(n_in, 512, bias=False))
    model.add_module("act_a", torch.nn.ReLU())
    model.add_module("drop_a", torch.nn.Dropout(0.2))
    model.add_module("fc_b", torch.nn.Linear(512, 512, bias=False))
    model.add_module("act_b", torch.nn.ReLU())
    model.add_module("drop_b", torch.nn.Dropout(0.2))
    model.add_module("fc_out", torch.nn.Linear(512, n_out, bias=False))
    model.add_module("probs", torch.nn.Softmax())
    return model


def train(model, ce, adam, x_batch, y_batch):
    x = autograd.Variable(x_batch, requires_grad=False)
    y = autograd.Variable(y_batch, requires_grad=False)

    adam.zero_grad()
    scores = model.forward(x)
    cost = ce.forward(scores, y)
    cost.backward()
    adam.step()
    return cost.item()


def predict(model, x_batch):
    out = model.forward(autograd.Variable(x_batch, requires_grad=False))
    return out.data.numpy().argmax(axis=1)


def main():
    torch.manual_seed(0)
    x_train, x_test, y_train, y_test = load_mnist(onehot=False)
    x_train = torch.from_numpy(x_train).float()
    x_test = torch.from_numpy(x_test).float()
    y_train = torch.from_numpy(y_train).long()

    n_rows, n_cols = x_train.size()
    model = make_net(n_cols, 10)
    ce = torch.nn.CrossEntropyLoss(size_average=True)
    adam = optim.Adam(model.parameters())
    batch_size = 100

    for epoch in range(100):
        total = 0.0
        n_batches = n_rows // batch_size
        for k in range(n_batches):
            lo, hi = k * batch_size, (k + 1) * batch_size
            total += train(model, ce, adam, x_train[lo:hi], y_train[lo:hi])
        predicted = predict(model, x_test)
        print("epoch %d cost %.4f acc %.2f%%" % (epoch + 1, total / n_batches, 100.0 * np.mean(predicted == y_test)))


if __name__ == "__main__":
    main()
