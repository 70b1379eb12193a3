"""
Shape: skorch-style example script: a small MyModule(nn.Module) defined inside the __main__ block with a softmax attribute applied at the end of forward; training is delegated to RayTrainNeuralNet(MyModule, criterion=nn.CrossEntropyLoss, ...) and net.fit(X, y) on a synthetic sklearn classification set.
Bug: the module returns nn.Softmax probabilities while the net's criterion is the CrossEntropyLoss class, which expects logits.
Thread: https://github.com/Yard1/ray-skorch/pull/18
"""
import argparse

import numpy as np
import ray
from sklearn.datasets import make_classification
from torch import nn

from ray_skorch import RayTrainNeuralNet

X, y = make_classification(1000, 20, n_informative=10, random_state=0)
X = X.astype(np.float32)
y = y.astype(np.int64)

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", default=None, type=str)
    parser.add_argument("--num-cpus", type=int, default=None)
    args = parser.parse_args()
    ray.init(address=args.address, num_cpus=args.num_cpus)

    class MyModule(nn.Module):
        def __init__(self, num_units=10, nonlin=nn.ReLU()):
            super(MyModule, self).__init__()
            self.dense0 = nn.Linear(20, num_units)
            self.nonlin = nonlin
            self.dropout = nn.Dropout(0.5)
            self.dense1 = nn.Linear(num_units, num_units)
            self.output = nn.Linear(num_units, 2)
            self.softmax = nn.Softmax(dim=-1)

        def forward(self, X, **kwargs):
            h = self.dropout(self.nonlin(self.dense0(X)))
            h = self.nonlin(self.dense1(h))
            return self.softmax(self.output(h))

    net = RayTrainNeuralNet(
        MyModule,
        num_workers=2,
        criterion=nn.CrossEntropyLoss,
        max_epochs=10,
        lr=0.1,
        iterator_train__unsqueeze_label_tensor=False,
        iterator_valid__unsqueeze_label_tensor=False,
    )
    net.fit(X, y)
    proba = net.predict_proba(X).to_pandas()
