"""
Shape: module-level script; model and Adam built at import time; test() uses the global model and calls model.eval(); train() calls model.train() once, then in a max_steps loop calls test() every 100 steps.
Bug: test() switches the model to eval mode and train() never calls model.train() again after it.
Thread: https://github.com/tk-rusch/coRNN/issues/1
"""
import torch
import torch.nn.utils
from torch import nn, optim

import model
import utils

device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')

seq_len = 100
max_steps = 60000
bsz = 50
n_test = 1000
n_inp, n_hid, n_out = 2, 128, 1

model = model.coRNN(n_inp, n_hid, n_out, 6e-2, 66, 15).to(device)
mse = nn.MSELoss()
optimizer = optim.Adam(model.parameters(), lr=2e-2)


def test():
    model.eval()
    with torch.no_grad():
        x, y = utils.get_batch(seq_len, n_test)
        y = y.unsqueeze(1)
        out = model(x.to(device))
        test_loss = mse(out, y.to(device))
    return test_loss.item()


def train():
    model.train()
    test_errs = []
    for it in range(max_steps):
        x, y = utils.get_batch(seq_len, bsz)
        y = y.unsqueeze(1)

        optimizer.zero_grad()
        out = model(x.to(device))
        loss = mse(out, y.to(device))
        loss.backward()
        optimizer.step()

        if it % 100 == 0 and it != 0:
            mse = test()
            print('test mse', mse)
            test_errs.append(mse)


if __name__ == '__main__':
    train()
