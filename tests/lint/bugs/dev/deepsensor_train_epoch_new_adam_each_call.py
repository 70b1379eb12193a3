"""
Shape: library helper train_epoch(model, task_list, lr, bsz, optimiser=None) picks a backend, builds Adam when no optimiser is passed, defines an inner one_step closure, and loops over batches; the caller runs it once per epoch without passing an optimiser.
Bug: a fresh Adam is constructed inside train_epoch on every epoch, discarding the moment estimates each time.
Thread: https://github.com/alan-turing-institute/deepsensor/issues/47
"""
import lab as B
import numpy as np
import pandas as pd

import deepsensor
import deepsensor.torch
from deepsensor.data.loader import TaskLoader
from deepsensor.data.processor import DataProcessor
from deepsensor.model.convnp import ConvNP, concat_tasks


def train_epoch(model, task_list, lr=5e-5, bsz=None, optimiser=None, show_bar=False):
    if deepsensor.backend.str == "tf":
        import tensorflow as tf

        if optimiser is None:
            optimiser = tf.keras.optimizers.Adam(lr)

        def one_step(batch):
            if not isinstance(batch, list):
                batch = [batch]
            with tf.GradientTape() as gt:
                mean_loss = B.mean(B.stack(*[model.loss_fn(t, normalise=True) for t in batch]))
            grads = gt.gradient(mean_loss, model.model.trainable_weights)
            optimiser.apply_gradients(zip(grads, model.model.trainable_weights))
            return mean_loss

    elif deepsensor.backend.str == "torch":
        import torch.optim as optim

        if optimiser is None:
            optimiser = optim.Adam(model.model.parameters(), lr=lr)

        def one_step(batch):
            if not isinstance(batch, list):
                batch = [batch]
            optimiser.zero_grad()
            per_task = []
            for t in batch:
                per_task.append(model.loss_fn(t, normalise=True))
            mean_loss = B.mean(B.stack(*per_task))
            mean_loss.backward()
            optimiser.step()
            return mean_loss.detach().cpu().numpy()

    else:
        raise NotImplementedError(deepsensor.backend.str)

    task_list = np.random.permutation(task_list)
    n_steps = len(task_list) // bsz if bsz is not None else len(task_list)

    from tqdm import tqdm

    step_losses = []
    for i in tqdm(range(n_steps), disable=not show_bar):
        if bsz is not None:
            task = concat_tasks(task_list[i * bsz:(i + 1) * bsz])
        else:
            task = task_list[i]
        step_losses.append(one_step(task))
    return step_losses


def main(ds_raw):
    processor = DataProcessor(x1_name="lat", x2_name="lon")
    ds = processor(ds_raw)
    loader = TaskLoader(context=ds, target=ds)
    model = ConvNP(processor, loader)

    tr_tasks = []
    for date in pd.date_range("2013-01-01", "2014-11-30")[::7]:
        tr_tasks.append(loader(date, context_sampling="all", target_sampling="all"))

    for epoch in range(10):
        train_epoch(model, tr_tasks, show_bar=True)
