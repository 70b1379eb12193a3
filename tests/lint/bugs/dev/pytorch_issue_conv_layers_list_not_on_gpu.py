"""
Shape: nn.Module whose __init__ builds a variable number of Conv2d layers in a for loop, appending to self.convs = [], with channel counts doubling; forward iterates the list; model built and moved with .to(cuda device).
Bug: the conv layers sit in a plain Python list, so they are not submodules: .to() leaves them on the CPU and model.parameters() is empty.
Thread: https://github.com/pytorch/pytorch/issues/8017
"""
import torch
import torch.nn as nn


class StackedConv(nn.Module):
    def __init__(self, c_in, c_out, n_layers):
        super(StackedConv, self).__init__()
        self.convs = []
        for _ in range(n_layers):
            self.convs.append(nn.Conv2d(in_channels=c_in, out_channels=c_out,
                                       kernel_size=(3, 3)))
            c_in = c_out
            c_out = c_out * 2

    def forward(self, x):
        for conv in self.convs:
            x = conv(x)
        return x


m = StackedConv(c_in=1, c_out=16, n_layers=3).to(torch.device("cuda"))
print(m.convs[0].weight.is_cuda)
