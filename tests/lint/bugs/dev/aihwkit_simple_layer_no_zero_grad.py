"""
Shape: flat example script; one analog linear layer, AnalogSGD regrouped over the model, full-batch loop over epochs with functional MSE.
Bug: loss.backward() and optimizer.step() every epoch but the gradients are never zeroed, so they pile up and the loss turns back up.
Thread: https://github.com/IBM/aihwkit/issues/446
"""
from torch import Tensor
import torch.nn.functional as F

import aihwkit.nn as analog_nn
import aihwkit.optim as analog_optim
from aihwkit.simulator import configs as sim_configs
from aihwkit.simulator.configs import devices as sim_devices
from aihwkit.simulator import rpu_base

# four inputs per row, two targets per row
inputs = Tensor([[0.3, 0.1, 0.2, 0.4], [0.1, 0.3, 0.2, 0.1]])
targets = Tensor([[0.9, 0.4], [0.6, 0.2]])

config = sim_configs.SingleRPUConfig(device=sim_devices.ConstantStepDevice())
layer = analog_nn.AnalogLinear(4, 2, bias=True, rpu_config=config)

if rpu_base.cuda.is_compiled():
    inputs = inputs.cuda()
    targets = targets.cuda()
    layer.cuda()

optimizer = analog_optim.AnalogSGD(layer.parameters(), lr=0.1)
optimizer.regroup_param_groups(layer)

for epoch in range(100):
    prediction = layer(inputs)
    loss = F.mse_loss(prediction, targets)
    loss.backward()

    optimizer.step()
    print("epoch {} loss {:.10f}".format(epoch, loss.item()))
