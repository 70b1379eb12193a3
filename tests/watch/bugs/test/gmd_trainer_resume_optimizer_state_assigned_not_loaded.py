"""A brain-tumour segmentation Trainer class (multi-modal 4-channel images, one class map per
pixel): __init__ builds the loaders, _init_model builds the network and an Adam optimizer, a poly
LR_Scheduler is called at every iteration, training() calls forward_batch() (zero_grad, backward,
step), validation() saves {'epoch', 'state_dict', 'optimizer', 'best_pred'} through a Saver when
the Dice improves, and resume() restores such a checkpoint when args.resume is set. resume() loads
the model weights but writes `self.optimizer.load_state_dict = checkpoint['optimizer']`: that
assigns the saved dict to an attribute and never calls the method, so a resumed run restarts Adam
with empty moments and step count. The first updates after the restart are full-lr, sign-like
moves in every coordinate, and the loss jumps back up although the weights were restored.

Thread: https://github.com/HaoWang420/Gradient-guided-Modality-Decoupling/pull/7
"""
import io
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


class BratsSlices(Dataset):
    """Synthetic 4-modality slices: a blob whose core/edema/enhancing rings give the label."""

    def __init__(self, n, size=24, seed=0):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
        self.images, self.labels = [], []
        for _ in range(n):
            cy, cx = torch.randint(6, size - 6, (2,), generator=g).tolist()
            r = 2.0 + 3.0 * torch.rand(1, generator=g).item()
            d = ((yy - cy) ** 2 + (xx - cx) ** 2).float().sqrt()
            label = torch.zeros(size, size, dtype=torch.long)
            label[d < r + 2.5] = 1  # edema
            label[d < r + 1.0] = 2  # tumour core
            label[d < r] = 3  # enhancing
            gain = torch.tensor([0.8, 1.2, 0.6, 1.0]) * (0.7 + 0.6 * torch.rand(4, generator=g))
            image = gain[:, None, None] * label.float()[None] / 3.0
            image = image + 0.5 * torch.randn(4, size, size, generator=g)
            self.images.append(image)
            self.labels.append(label)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        return {"image": self.images[idx], "label": self.labels[idx]}


def make_data_loader(args):
    train = BratsSlices(args.n_train, seed=0)
    val = BratsSlices(args.n_val, seed=1)
    train_loader = DataLoader(train, batch_size=args.batch_size, shuffle=True,
                              generator=torch.Generator().manual_seed(args.seed))
    val_loader = DataLoader(val, batch_size=args.test_batch_size)
    return train_loader, val_loader, 4, 4


class SmallUNet(nn.Module):
    def __init__(self, nchannels, nclass, width=16):
        super().__init__()
        self.enc1 = nn.Sequential(nn.Conv2d(nchannels, width, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(width, width, 3, padding=1), nn.ReLU())
        self.enc2 = nn.Sequential(nn.Conv2d(width, 2 * width, 3, stride=2, padding=1), nn.ReLU())
        self.up = nn.ConvTranspose2d(2 * width, width, 2, stride=2)
        self.dec = nn.Sequential(nn.Conv2d(2 * width, width, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(width, nclass, 1))

    def forward(self, x):
        e1 = self.enc1(x)
        return self.dec(torch.cat([e1, self.up(self.enc2(e1))], dim=1))


class LR_Scheduler:
    def __init__(self, mode, base_lr, num_epochs, iters_per_epoch):
        self.mode = mode
        self.lr = base_lr
        self.iters_per_epoch = iters_per_epoch
        self.N = num_epochs * iters_per_epoch

    def __call__(self, optimizer, i, epoch, best_pred=0.0):
        T = epoch * self.iters_per_epoch + i
        lr = self.lr * pow(1 - 1.0 * T / self.N, 0.9)
        for group in optimizer.param_groups:
            group["lr"] = lr


class Saver:
    """Keeps the best checkpoint as serialized bytes (stands in for the .pth.tar on disk)."""

    def __init__(self):
        self.best_path = None

    def save_checkpoint(self, state, is_best):
        if is_best:
            buf = io.BytesIO()
            torch.save(state, buf)
            self.best_path = buf


class Evaluator:
    def __init__(self, nclass):
        self.nclass = nclass
        self.reset()

    def reset(self):
        self.inter = np.zeros(self.nclass - 1)
        self.total = np.zeros(self.nclass - 1)

    def add_batch(self, target, pred):
        for c in range(1, self.nclass):
            self.inter[c - 1] += np.logical_and(pred >= c, target >= c).sum()
            self.total[c - 1] += (pred >= c).sum() + (target >= c).sum()

    def Dice_score(self):
        return float(np.mean(2 * self.inter / np.maximum(self.total, 1)))


class Trainer(object):
    def __init__(self, args, saver):
        self.args = args
        self.saver = saver
        self.train_loader, self.val_loader, self.nclass, self.nchannels = make_data_loader(args)
        self._init_model(self.nchannels, self.nclass)
        self.criterion = nn.CrossEntropyLoss()
        self.evaluator = Evaluator(self.nclass)
        self.scheduler = LR_Scheduler(args.lr_scheduler, args.optim.lr, args.epochs,
                                      len(self.train_loader))
        self.resume()
        self.iter_losses = []

    def _init_model(self, nchannel, nclass):
        torch.manual_seed(self.args.seed)
        self.model = SmallUNet(nchannel, nclass)
        train_params = [{"params": self.model.parameters(), "lr": self.args.optim.lr}]
        if self.args.optim.name == "sgd":
            self.optimizer = torch.optim.SGD(train_params, momentum=self.args.optim.momentum,
                                             weight_decay=self.args.optim.weight_decay)
        elif self.args.optim.name == "adam":
            self.optimizer = torch.optim.Adam(train_params,
                                              weight_decay=self.args.optim.weight_decay)

    def resume(self):
        self.best_pred = 0.0
        if self.args.resume is not None:
            self.args.resume.seek(0)
            checkpoint = torch.load(self.args.resume)
            self.model.load_state_dict(checkpoint["state_dict"])
            self.best_pred = checkpoint["best_pred"]
            print("=> loaded checkpoint (epoch {})".format(checkpoint["epoch"]))
            self.args.start_epoch = checkpoint["epoch"]
            self.optimizer.load_state_dict = checkpoint["optimizer"]

    def training(self, epoch):
        self.model.train()
        train_loss = 0.0
        for i, sample in enumerate(self.train_loader):
            image, target = sample["image"], sample["label"]
            self.scheduler(self.optimizer, i, epoch, self.best_pred)
            output, loss = self.forward_batch(image, target)
            train_loss += loss.item()
            self.iter_losses.append(loss.item())
        print("[Epoch: {}] train loss: {:.4f}".format(epoch, train_loss / len(self.train_loader)))

    def validation(self, epoch):
        self.model.eval()
        self.evaluator.reset()
        for sample in self.val_loader:
            with torch.no_grad():
                output = self.model(sample["image"])
            self.evaluator.add_batch(sample["label"].numpy(), output.argmax(1).numpy())
        dice = self.evaluator.Dice_score()
        if dice > self.best_pred:
            self.best_pred = dice
            self.saver.save_checkpoint({
                "epoch": epoch + 1,
                "state_dict": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "best_pred": self.best_pred,
            }, True)
        print("Validation [Epoch: {}] Dice: {:.4f}".format(epoch, dice))

    def forward_batch(self, image, target):
        output = self.model(image)
        loss = self.criterion(output, target)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return output, loss


def run(args, saver, stop_after=None):
    trainer = Trainer(args, saver)
    last = args.epochs if stop_after is None else stop_after
    for epoch in range(args.start_epoch, last):
        trainer.training(epoch)
        trainer.validation(epoch)
    return trainer


def main():
    args = SimpleNamespace(
        optim=SimpleNamespace(name="adam", lr=1e-2, weight_decay=1e-5, momentum=0.9),
        lr_scheduler="poly", epochs=16, start_epoch=0, batch_size=16, test_batch_size=64,
        n_train=256, n_val=128, seed=42, resume=None)
    saver = Saver()
    print("--- first job (stopped after 12 epochs) ---")
    first = run(args, saver, stop_after=12)
    before = np.mean(first.iter_losses[-16:])

    print("--- resumed job ---")
    args.resume = saver.best_path
    resumed = run(args, saver)
    after = resumed.iter_losses[:16]
    print(f"mean loss over the last 16 iterations before the restart: {before:.4f}")
    print(f"mean / max loss over the first 16 iterations after resuming: "
          f"{np.mean(after):.4f} / {np.max(after):.4f}")
    first_param = next(resumed.model.parameters())
    print(f"Adam step count at the end of the resumed job: "
          f"{int(resumed.optimizer.state[first_param]['step'])} "
          f"(iterations run in both jobs: {len(first.iter_losses) + len(resumed.iter_losses)})")


if __name__ == "__main__":
    main()
