"""
Shape: run_epoch() helper in its own module takes model/loader/optimizer/criterion; main builds MSELoss + Adam and calls run_epoch() once per epoch, validating every few epochs.
Bug: the per-batch loop in run_epoch() calls loss.backward() and adam.step() but never zero_grad(), so gradients accumulate across batches.
Thread: https://github.com/yastrebksv/TennisCourtDetector/issues/7
"""
import numpy as np
from torch.utils.data import DataLoader
import torch
import torch.nn as nn
import torch.nn.functional as F

from dataset import CourtKeypoints
from tracknet import KeypointNet
from base_validator import val


def run_epoch(model, tr_loader, adam, mse, dev, epoch, step_cap=1000):
    model.train()
    batch_losses = []
    step_cap = min(step_cap, len(tr_loader))

    for it, batch in enumerate(tr_loader):
        heat_pred = model(batch[0].float().to(dev))
        heat_true = batch[1].float().to(dev)
        loss = mse(F.sigmoid(heat_pred), heat_true)

        loss.backward()
        adam.step()
        print("epoch {} step {}/{} loss {:.5f}".format(epoch, it, step_cap, loss.item()))
        batch_losses.append(loss.item())
        if it > step_cap:
            break

    return np.mean(batch_losses)


if __name__ == "__main__":
    tr_loader = DataLoader(
        CourtKeypoints("train"), batch_size=2, shuffle=True, num_workers=1, pin_memory=True
    )
    va_loader = DataLoader(
        CourtKeypoints("val"), batch_size=2, shuffle=False, num_workers=1, pin_memory=True
    )

    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = KeypointNet(out_channels=15).to(dev)

    mse = nn.MSELoss()
    adam = torch.optim.Adam(model.parameters(), 1e-5, betas=(0.9, 0.999), weight_decay=0)

    best_acc = 0
    for epoch in range(500):
        epoch_loss = run_epoch(model, tr_loader, adam, mse, dev, epoch, 1000)
        if epoch > 0 and epoch % 5 == 0:
            v_loss, tp, fp, fn, tn, prec, acc = val(model, va_loader, mse, dev, epoch)
            if acc > best_acc:
                best_acc = acc
                torch.save(model.state_dict(), "model_best.pt")
