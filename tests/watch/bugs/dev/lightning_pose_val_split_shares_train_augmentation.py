"""A Lightning-Pose-style keypoint regression: one labeled dataset whose __getitem__ runs an
imgaug-like pipeline (random rotation + shift applied to the image and its keypoints together,
brightness jitter, then a final resize), a BaseDataModule whose setup() splits that one dataset with
random_split into train/val/test subsets, and a LightningModule-like RegressionTracker with
training_step / validation_step driven by a small fit() loop that keeps the best checkpoint by
val_loss and stops early on it. Because random_split returns Subsets that all point at the same
underlying dataset, the validation and test subsets also go through the random augmentation
pipeline: every validation pass scores freshly rotated, shifted and jittered frames, so the logged
val_loss is noisy and biased upward, and checkpoint selection and early stopping follow the
augmentation draw rather than the model.

Thread: https://github.com/paninski-lab/lightning-pose/pull/181
"""
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset, random_split

IMG = 40      # stored frame size
OUT = 32      # size after the final resize
N_KPS = 2


def render_frames(n, seed):
    g = torch.Generator().manual_seed(seed)
    kps = 8 + torch.rand(n, N_KPS, 2, generator=g) * (IMG - 16)  # (x, y) in pixels
    ys, xs = torch.meshgrid(torch.arange(IMG).float(), torch.arange(IMG).float(), indexing="ij")
    imgs = torch.zeros(n, 1, IMG, IMG)
    for k in range(N_KPS):
        d2 = (xs - kps[:, k, 0, None, None]) ** 2 + (ys - kps[:, k, 1, None, None]) ** 2
        imgs[:, 0] += (1.0 if k == 0 else 0.6) * torch.exp(-d2 / (2 * 2.0 ** 2))
    imgs += 0.05 * torch.randn(imgs.shape, generator=g)
    return imgs, kps


class RandomAffine:
    def __init__(self, rotate=25.0, shift=0.12):
        self.rotate, self.shift = rotate, shift

    def __call__(self, img, kps):
        ang = math.radians((torch.rand(1).item() * 2 - 1) * self.rotate)
        tx, ty = ((torch.rand(2) * 2 - 1) * self.shift).tolist()
        cos, sin = math.cos(ang), math.sin(ang)
        # affine_grid maps output coords to input coords (normalised [-1, 1])
        theta = torch.tensor([[cos, -sin, tx], [sin, cos, ty]])
        grid = F.affine_grid(theta[None], [1, 1, IMG, IMG], align_corners=False)
        img = F.grid_sample(img[None], grid, align_corners=False)[0]
        # keypoints move with the inverse map
        p = (kps + 0.5) / IMG * 2 - 1
        a, t = theta[:, :2], theta[:, 2]
        p = (p - t) @ torch.linalg.inv(a).T
        kps = (p + 1) / 2 * IMG - 0.5
        return img, kps


class RandomBrightness:
    def __init__(self, low=0.6, high=1.4):
        self.low, self.high = low, high

    def __call__(self, img, kps):
        s = self.low + (self.high - self.low) * torch.rand(1).item()
        return img * s + 0.1 * (torch.rand(1).item() - 0.5), kps


class Resize:
    def __init__(self, size):
        self.size = size

    def __call__(self, img, kps):
        img = F.interpolate(img[None], size=(self.size, self.size), mode="bilinear",
                            align_corners=False)[0]
        return img, kps * (self.size / IMG)


class Sequential(list):
    def __call__(self, img, kps):
        for aug in self:
            img, kps = aug(img, kps)
        return img, kps


class BaseTrackingDataset(Dataset):
    def __init__(self, n, seed, imgaug_transform):
        self.images, self.keypoints = render_frames(n, seed)
        self.imgaug_transform = imgaug_transform

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        img, kps = self.imgaug_transform(self.images[idx], self.keypoints[idx])
        return {"images": img, "keypoints": (kps / OUT).reshape(-1)}


class BaseDataModule:
    def __init__(self, dataset, train_batch_size=16, val_batch_size=64,
                 train_probability=0.8, val_probability=0.1, torch_seed=0):
        self.dataset = dataset
        self.train_batch_size, self.val_batch_size = train_batch_size, val_batch_size
        self.train_probability, self.val_probability = train_probability, val_probability
        self.torch_seed = torch_seed

    def setup(self):
        n = len(self.dataset)
        n_train = int(self.train_probability * n)
        n_val = int(self.val_probability * n)
        sizes = [n_train, n_val, n - n_train - n_val]
        self.train_dataset, self.val_dataset, self.test_dataset = random_split(
            self.dataset, sizes, generator=torch.Generator().manual_seed(self.torch_seed))
        print(f"dataset splits -- train: {sizes[0]}, val: {sizes[1]}, test: {sizes[2]}")

    def train_dataloader(self):
        return DataLoader(self.train_dataset, batch_size=self.train_batch_size, shuffle=True,
                          generator=torch.Generator().manual_seed(self.torch_seed))

    def val_dataloader(self):
        return DataLoader(self.val_dataset, batch_size=self.val_batch_size)


class RegressionTracker(nn.Module):
    def __init__(self, num_keypoints, lr=2e-3):
        super().__init__()
        self.lr = lr
        self.backbone = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.Flatten(),
        )
        self.head = nn.Linear(32 * (OUT // 4) ** 2, 2 * num_keypoints)

    def forward(self, images):
        return self.head(self.backbone(images))

    def training_step(self, batch):
        return F.mse_loss(self(batch["images"]), batch["keypoints"])

    def validation_step(self, batch):
        return F.mse_loss(self(batch["images"]), batch["keypoints"], reduction="sum")

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)


class Trainer:
    def __init__(self, max_epochs, patience):
        self.max_epochs, self.patience = max_epochs, patience

    def fit(self, model, datamodule):
        datamodule.setup()
        optimizer = model.configure_optimizers()
        best, best_state, bad_epochs, step = float("inf"), None, 0, 0
        for epoch in range(self.max_epochs):
            model.train()
            for batch in datamodule.train_dataloader():
                loss = model.training_step(batch)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                step += 1
            val_loss = self.validate(model, datamodule)
            if val_loss < best:
                best, best_state, bad_epochs = val_loss, copy.deepcopy(model.state_dict()), 0
            else:
                bad_epochs += 1
            print(f"epoch {epoch}  step {step}  train_loss {loss.item():.5f}  val_loss {val_loss:.5f}"
                  f"  best {best:.5f}")
            if bad_epochs >= self.patience:
                print("early stopping on val_loss")
                break
        model.load_state_dict(best_state)
        return best

    @torch.no_grad()
    def validate(self, model, datamodule):
        model.eval()
        total, count = 0.0, 0
        for batch in datamodule.val_dataloader():
            total += model.validation_step(batch).item()
            count += batch["keypoints"].numel()
        return total / count


def main():
    torch.manual_seed(0)
    pipeline = Sequential([RandomAffine(rotate=25.0, shift=0.12), RandomBrightness(), Resize(OUT)])
    dataset = BaseTrackingDataset(n=600, seed=1, imgaug_transform=pipeline)
    datamodule = BaseDataModule(dataset, train_batch_size=16, val_batch_size=64)
    model = RegressionTracker(num_keypoints=N_KPS)
    best = Trainer(max_epochs=8, patience=3).fit(model, datamodule)
    print(f"best val_loss {best:.5f}")


if __name__ == "__main__":
    main()
