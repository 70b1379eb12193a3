"""
Shape: build_data() helper builds the dataset by class name, random_split into train/val, and returns both DataLoaders; an experiment() function unpacks them and hands the training loader to trainer.train(train_dataloader=...) from the package.
Bug: the training DataLoader is built without shuffle=True, so batches come in the same order every epoch.
Thread: https://github.com/joaoamcarvalho/mpd-public/issues/6
"""
import os

import torch
from torch.utils.data import DataLoader, random_split

from mpd import datasets, losses, models, trainer


def build_model(net_name=None, targs=None, **kwargs):
    NetCls = getattr(models, net_name)
    return NetCls(**kwargs).to(targs['device'])


def build_loss(loss_name=None, **kwargs):
    LossCls = getattr(losses, loss_name)
    return LossCls(**kwargs).loss_fn


def build_data(data_name=None, subdir=None, batch_size=2, val_frac=0.05,
                out_dir=None, dump_idx=False, **kwargs):
    DataCls = getattr(datasets, data_name)
    whole = DataCls(dataset_subdir=subdir, **kwargs)

    train_part, val_part = random_split(whole, [1 - val_frac, val_frac])
    tr_loader = DataLoader(train_part, batch_size=batch_size)
    va_loader = DataLoader(val_part, batch_size=batch_size)

    if dump_idx:
        torch.save(train_part.indices, os.path.join(out_dir, 'train_subset_indices.pt'))
        torch.save(val_part.indices, os.path.join(out_dir, 'val_subset_indices.pt'))

    return train_part, tr_loader, val_part, va_loader


def experiment(subdir='EnvSimple2D-RobotPointMass', batch_size=32, lr=1e-4,
               num_epochs=100, device='cuda', out_dir='logs'):
    targs = {'device': torch.device(device), 'dtype': torch.float32}

    tr_part, tr_loader, va_part, va_loader = build_data(
        data_name='TrajectoryDataset',
        subdir=subdir,
        batch_size=batch_size,
        out_dir=out_dir,
        dump_idx=True,
        tensor_args=targs,
    )
    base_ds = tr_part.dataset

    model = build_model(net_name='GaussianDiffusionModel', targs=targs,
                      state_dim=base_ds.state_dim, n_support_points=base_ds.n_support_points)
    loss_fn = val_loss_fn = build_loss(loss_name='GaussianDiffusionLoss')

    trainer.train(
        model=model,
        train_dataloader=tr_loader,
        train_subset=tr_part,
        val_dataloader=va_loader,
        val_subset=tr_part,
        epochs=num_epochs,
        model_dir=out_dir,
        lr=lr,
        loss_fn=loss_fn,
        val_loss_fn=val_loss_fn,
        clip_grad=True,
        tensor_args=targs,
    )


if __name__ == '__main__':
    experiment()
