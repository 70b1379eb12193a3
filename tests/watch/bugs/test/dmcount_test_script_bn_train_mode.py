"""A DM-Count-style crowd-counting pipeline: a Trainer class (setup / train / train_epoch /
val_epoch) fits a small fully convolutional density-map regressor whose backbone uses
BatchNorm (the reporter had swapped the VGG19 for a ResNet-50) with Adam, a count L1 loss on the
summed density map plus a pixelwise MSE to the target density; val_epoch switches to eval() as
it should. After training, a separate test step in the style of the project's test.py takes the
trained model, loops over the test loader with batch size 1 and reports MAE / MSE of the counts,
but never calls model.eval(): every test image is normalised by BatchNorm with its own
statistics (and written into the running buffers), so the reported test MAE is not the trained
model's error.

Thread: https://github.com/cvlab-stonybrook/DM-Count/issues/3
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


class CrowdScenes(Dataset):
    """Grey 32x32 images with Gaussian 'heads'; target is the 8x8 density map (sums to the count)."""

    def __init__(self, n, seed, size=32, down=4):
        g = torch.Generator().manual_seed(seed)
        ys, xs = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
        self.images, self.dens = [], []
        for _ in range(n):
            count = int(torch.randint(2, 30, (1,), generator=g))
            pts = torch.rand(count, 2, generator=g) * (size - 4) + 2
            d = torch.zeros(size, size)
            for py, px in pts:
                d += torch.exp(-((ys - py) ** 2 + (xs - px) ** 2) / 2.0)
            img = 0.3 + 0.6 * d.clamp(max=1.0) + 0.1 * torch.randn(size, size, generator=g)
            dmap = torch.zeros(size // down, size // down)
            iy = (pts[:, 0] / down).long().clamp(max=size // down - 1)
            ix = (pts[:, 1] / down).long().clamp(max=size // down - 1)
            dmap.index_put_((iy, ix), torch.ones(count), accumulate=True)
            self.images.append(img.unsqueeze(0))
            self.dens.append(dmap.unsqueeze(0))

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.images[i], self.dens[i], self.dens[i].sum()


class DensityNet(nn.Module):
    def __init__(self):
        super().__init__()
        def block(cin, cout):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())
        self.features = nn.Sequential(block(1, 16), nn.MaxPool2d(2), block(16, 32), nn.MaxPool2d(2), block(32, 32))
        self.reg = nn.Sequential(nn.Conv2d(32, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 1, 1))

    def forward(self, x):
        return F.relu(self.reg(self.features(x)))


class Trainer:
    def __init__(self, max_epoch=3, batch_size=8, lr=2e-3):
        self.max_epoch, self.batch_size, self.lr = max_epoch, batch_size, lr

    def setup(self):
        self.datasets = {"train": CrowdScenes(320, seed=0), "val": CrowdScenes(48, seed=1)}
        self.dataloaders = {
            "train": DataLoader(self.datasets["train"], batch_size=self.batch_size, shuffle=True,
                                generator=torch.Generator().manual_seed(0)),
            "val": DataLoader(self.datasets["val"], batch_size=1, shuffle=False),
        }
        self.model = DensityNet()
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=self.lr, weight_decay=1e-4)
        self.mae = nn.L1Loss()
        self.mse = nn.MSELoss()

    def train(self):
        for epoch in range(self.max_epoch):
            self.epoch = epoch
            self.train_epoch()
            self.val_epoch()

    def train_epoch(self):
        self.model.train()
        errs = []
        for inputs, dens, count in self.dataloaders["train"]:
            outputs = self.model(inputs)
            count_loss = self.mae(outputs.sum(dim=(1, 2, 3)), count)
            dens_loss = self.mse(outputs, dens)
            loss = count_loss + 10.0 * dens_loss
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            errs.append((outputs.detach().sum(dim=(1, 2, 3)) - count).abs().mean().item())
        print(f"epoch {self.epoch} train MAE {np.mean(errs):.2f}")

    def val_epoch(self):
        self.model.eval()
        res = []
        for inputs, _, count in self.dataloaders["val"]:
            with torch.no_grad():
                outputs = self.model(inputs)
            res.append(count[0].item() - outputs.sum().item())
        res = np.array(res)
        print(f"epoch {self.epoch} val MAE {np.mean(np.abs(res)):.2f} MSE {np.sqrt(np.mean(res ** 2)):.2f}")


def test(model, dataset):
    dataloader = DataLoader(dataset, 1, shuffle=False)
    image_errs = []
    for inputs, _, count in dataloader:
        assert inputs.size(0) == 1, "the batch size should equal to 1"
        with torch.set_grad_enabled(False):
            outputs = model(inputs)
        image_errs.append(count[0].item() - torch.sum(outputs).item())
    image_errs = np.array(image_errs)
    print(f"test: mae {np.mean(np.abs(image_errs)):.2f}, mse {np.sqrt(np.mean(image_errs ** 2)):.2f}")


def main():
    torch.manual_seed(0)
    trainer = Trainer()
    trainer.setup()
    trainer.train()
    model = DensityNet()
    model.load_state_dict(trainer.model.state_dict())
    test(model, CrowdScenes(48, seed=2))


if __name__ == "__main__":
    main()
