"""
Shape: CIFAR classifier nn.Module `SimpNetCifar` with self.features = self._build_trunk() (a long nn.Sequential of Conv/BatchNorm/ReLU blocks with nn.Dropout2d after each pooling), a Linear classifier, a custom load_partial_state(), and a forward that does global max pooling then functional 2-D dropout.
Bug: forward calls F.dropout2d(h, 0.1, training=True), hard-coding training mode, so the dropout stays active after model.eval() and evaluation outputs change from run to run.
Thread: https://github.com/Coderx7/SimpleNet/issues/2
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import Parameter


class SimpNetCifar(nn.Module):
    def __init__(self, n_classes=10, variant='SimpNetCifar'):
        super(SimpNetCifar, self).__init__()
        self.features = self._build_trunk()
        self.classifier = nn.Linear(256, n_classes)

    def load_partial_state(self, state_dict):
        own = self.state_dict()
        for key, value in state_dict.items():
            key = key.replace('module.', '')
            if key not in own:
                continue
            if isinstance(value, Parameter):
                value = value.data
            try:
                own[key].copy_(value)
            except Exception:
                print('shape mismatch for', key, own[key].size(), value.size())

    def forward(self, x):
        h = self.features(x)
        h = F.max_pool2d(h, kernel_size=h.size()[2:])
        h = F.dropout2d(h, 0.1, training=True)
        h = h.view(h.size(0), -1)
        return self.classifier(h)

    def _build_trunk(self):
        model = nn.Sequential(
            nn.Conv2d(3, 64, kernel_size=[3, 3], stride=(1, 1), padding=(1, 1)),
            nn.BatchNorm2d(64, eps=1e-05, momentum=0.05, affine=True),
            nn.ReLU(inplace=True),
            nn.Conv2d(64, 128, kernel_size=[3, 3], stride=(1, 1), padding=(1, 1)),
            nn.BatchNorm2d(128, eps=1e-05, momentum=0.05, affine=True),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=(2, 2), stride=(2, 2), dilation=(1, 1), ceil_mode=False),
            nn.Dropout2d(p=0.1),
            nn.Conv2d(128, 256, kernel_size=[3, 3], stride=(1, 1), padding=(1, 1)),
            nn.BatchNorm2d(256, eps=1e-05, momentum=0.05, affine=True),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=(2, 2), stride=(2, 2), dilation=(1, 1), ceil_mode=False),
            nn.Dropout2d(p=0.1),
            nn.Conv2d(256, 2048, kernel_size=[1, 1], stride=(1, 1), padding=(0, 0)),
            nn.BatchNorm2d(2048, eps=1e-05, momentum=0.05, affine=True),
            nn.ReLU(inplace=True),
            nn.Conv2d(2048, 256, kernel_size=[1, 1], stride=(1, 1), padding=(0, 0)),
            nn.BatchNorm2d(256, eps=1e-05, momentum=0.05, affine=True),
            nn.ReLU(inplace=True),
        )
        for m in model.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.xavier_uniform_(m.weight.data, gain=nn.init.calculate_gain('relu'))
        return model
