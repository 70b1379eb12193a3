"""A pytorch-3dunet-style 3D segmentation pipeline: a module-level GLOBAL_RANDOM_STATE draws one seed
per Transformer, and the Transformer builds each augmentation (RandomFlip, RandomRotate90,
RandomContrast) with its own np.random.RandomState(seed) so the raw and label pipelines stay in
step; a StandardDataset cuts patches out of in-memory volumes with a SliceBuilder and applies
raw_transform / label_transform in __getitem__; a DataLoader with num_workers=2 feeds a
UNet3DTrainer whose fit() loop trains a small 3D U-Net with BCE-with-logits and validates with a
Dice score. The RandomState objects live inside the dataset, so every worker process starts from
an identical copy of them: the two workers emit the same sequence of flips, rotations and
contrast factors, and because workers are re-created each epoch from the untouched parent copy,
that same sequence repeats every epoch. The augmentation the config asks for is mostly replaced
by a handful of repeated draws; nothing errors and the loss goes down.

Thread: https://github.com/wolny/pytorch-3dunet/issues/32
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

GLOBAL_RANDOM_STATE = np.random.RandomState(47)


class RandomFlip:
    def __init__(self, random_state, **kwargs):
        self.random_state = random_state

    def __call__(self, m):
        for axis in (1, 2, 3):
            if self.random_state.uniform() > 0.5:
                m = np.flip(m, axis)
        return m


class RandomRotate90:
    def __init__(self, random_state, **kwargs):
        self.random_state = random_state

    def __call__(self, m):
        k = self.random_state.randint(0, 4)
        return np.rot90(m, k, (2, 3))


class RandomContrast:
    def __init__(self, random_state, alpha=(0.5, 1.5), execution_probability=0.5, **kwargs):
        self.random_state, self.alpha, self.p = random_state, alpha, execution_probability

    def __call__(self, m):
        if self.random_state.uniform() < self.p:
            a = self.random_state.uniform(*self.alpha)
            return np.clip(m.mean() + a * (m - m.mean()), -3, 3)
        return m


class ToTensor:
    def __init__(self, **kwargs):
        pass

    def __call__(self, m):
        return torch.from_numpy(np.ascontiguousarray(m)).float()


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, m):
        for t in self.transforms:
            m = t(m)
        return m


class Transformer:
    def __init__(self, phase_config):
        self.phase_config = phase_config
        self.seed = GLOBAL_RANDOM_STATE.randint(10000000)

    def raw_transform(self):
        return self._create_transform("raw")

    def label_transform(self):
        return self._create_transform("label")

    def _create_transform(self, name):
        augs = []
        for c in self.phase_config[name]:
            config = dict(c)
            config["random_state"] = np.random.RandomState(self.seed)
            augs.append(globals()[config.pop("name")](**config))
        return Compose(augs)


class SliceBuilder:
    def __init__(self, shape, patch_shape, stride_shape):
        self.slices = []
        for z in range(0, shape[1] - patch_shape[0] + 1, stride_shape[0]):
            for y in range(0, shape[2] - patch_shape[1] + 1, stride_shape[1]):
                for x in range(0, shape[3] - patch_shape[2] + 1, stride_shape[2]):
                    self.slices.append((slice(None), slice(z, z + patch_shape[0]),
                                        slice(y, y + patch_shape[1]), slice(x, x + patch_shape[2])))


def make_volume(seed, size=32):
    rng = np.random.RandomState(seed)
    zz, yy, xx = np.meshgrid(*[np.arange(size)] * 3, indexing="ij")
    label = np.zeros((1, size, size, size), dtype=np.float32)
    for _ in range(14):
        c = rng.uniform(0, size, 3)
        axes = rng.uniform(2.0, 5.0, 3)
        tilt = rng.uniform(-0.6, 0.6)
        d = ((zz - c[0]) / axes[0]) ** 2 + ((yy - c[1] + tilt * (xx - c[2])) / axes[1]) ** 2 \
            + ((xx - c[2]) / axes[2]) ** 2
        label[0][d < 1] = 1.0
    raw = label * 1.0 + rng.normal(0, 0.8, label.shape).astype(np.float32)
    return raw, label


class StandardDataset(Dataset):
    def __init__(self, raw, label, phase, transformer_config, patch_shape, stride_shape):
        self.raw, self.label, self.phase = raw, label, phase
        transformer = Transformer(transformer_config[phase])
        self.raw_transform = transformer.raw_transform()
        self.label_transform = transformer.label_transform()
        self.slices = SliceBuilder(raw.shape, patch_shape, stride_shape).slices

    def __len__(self):
        return len(self.slices)

    def __getitem__(self, idx):
        idx_slice = self.slices[idx]
        raw = self.raw_transform(self.raw[idx_slice])
        label = self.label_transform(self.label[idx_slice])
        return raw, label


def conv_block(c_in, c_out):
    return nn.Sequential(nn.Conv3d(c_in, c_out, 3, padding=1), nn.GroupNorm(4, c_out), nn.ReLU(),
                         nn.Conv3d(c_out, c_out, 3, padding=1), nn.GroupNorm(4, c_out), nn.ReLU())


class UNet3D(nn.Module):
    def __init__(self, in_channels=1, out_channels=1, f_maps=8):
        super().__init__()
        self.enc1 = conv_block(in_channels, f_maps)
        self.enc2 = conv_block(f_maps, 2 * f_maps)
        self.dec1 = conv_block(3 * f_maps, f_maps)
        self.final_conv = nn.Conv3d(f_maps, out_channels, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool3d(e1, 2))
        up = F.interpolate(e2, scale_factor=2, mode="nearest")
        return self.final_conv(self.dec1(torch.cat([up, e1], dim=1)))


def dice_coefficient(logits, target, eps=1e-6):
    pred = (torch.sigmoid(logits) > 0.5).float()
    return (2 * (pred * target).sum() / (pred.sum() + target.sum() + eps)).item()


class UNet3DTrainer:
    def __init__(self, model, optimizer, loss_criterion, loaders, max_num_epochs, validate_after_iters):
        self.model, self.optimizer, self.loss_criterion = model, optimizer, loss_criterion
        self.loaders, self.max_num_epochs = loaders, max_num_epochs
        self.validate_after_iters = validate_after_iters
        self.num_iterations = 0

    def fit(self):
        for epoch in range(self.max_num_epochs):
            self.model.train()
            for raw, target in self.loaders["train"]:
                output = self.model(raw)
                loss = self.loss_criterion(output, target)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                self.num_iterations += 1
                if self.num_iterations % self.validate_after_iters == 0:
                    score = self.validate()
                    print(f"epoch {epoch}  iter {self.num_iterations}  train_loss {loss.item():.4f}"
                          f"  val_dice {score:.4f}")
                    self.model.train()

    @torch.no_grad()
    def validate(self):
        self.model.eval()
        scores = [dice_coefficient(self.model(raw), target) for raw, target in self.loaders["val"]]
        return float(np.mean(scores))


def main():
    torch.manual_seed(0)
    transformer_config = {
        "train": {
            "raw": [{"name": "RandomFlip"}, {"name": "RandomRotate90"},
                    {"name": "RandomContrast"}, {"name": "ToTensor"}],
            "label": [{"name": "RandomFlip"}, {"name": "RandomRotate90"}, {"name": "ToTensor"}],
        },
        "val": {"raw": [{"name": "ToTensor"}], "label": [{"name": "ToTensor"}]},
    }
    raw_tr, label_tr = make_volume(seed=1)
    raw_va, label_va = make_volume(seed=2)
    train_ds = StandardDataset(raw_tr, label_tr, "train", transformer_config, (16, 16, 16), (8, 8, 8))
    val_ds = StandardDataset(raw_va, label_va, "val", transformer_config, (16, 16, 16), (16, 16, 16))
    loaders = {
        "train": DataLoader(train_ds, batch_size=2, shuffle=True, num_workers=2,
                            generator=torch.Generator().manual_seed(0)),
        "val": DataLoader(val_ds, batch_size=4),
    }
    model = UNet3D()
    trainer = UNet3DTrainer(model, torch.optim.Adam(model.parameters(), lr=1e-3),
                            nn.BCEWithLogitsLoss(), loaders, max_num_epochs=8, validate_after_iters=28)
    trainer.fit()


if __name__ == "__main__":
    main()
