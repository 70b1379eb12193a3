"""A MONAI-style image restoration setup: a small 2-D denoising network trained with
L1 + ssim_weight * SSIMLoss(spatial_dims=2), the usual pairing for MR/CT enhancement. The loss
library follows MONAI's layering: metrics derive from an IterationMetric base class whose
__call__ detaches its inputs (metrics are meant for evaluation) before dispatching to
_compute_tensor; SSIMMetric(IterationMetric) implements the Gaussian-window SSIM there; and
SSIMLoss(_Loss).forward was refactored to reuse the metric by calling
SSIMMetric(...)(x, y) and returning 1 - ssim.mean(). The training loop is a plain
for-epoch / for-batch_data loop with optimizer.zero_grad(), loss.backward(), optimizer.step(),
epoch_loss bookkeeping and a validation pass reporting mean SSIM.

The bug: because the loss goes through the metric's __call__, both images are detached before
SSIM is computed, so the SSIM term has no graph back to the network. Alone it would raise at
backward; added to the L1 term it runs silently: the SSIM part is logged and weighted but only
L1 trains the model, so the structural-similarity objective has no effect.

Thread: https://github.com/Project-MONAI/MONAI/issues/5668
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules.loss import _Loss
from torch.utils.data import DataLoader, TensorDataset


class IterationMetric:
    """Base class of per-iteration metrics: inputs are detached before computing."""

    def __call__(self, y_pred, y=None, **kwargs):
        y_pred = y_pred.detach()
        if isinstance(y, torch.Tensor):
            y = y.detach()
        return self._compute_tensor(y_pred, y, **kwargs)

    def _compute_tensor(self, y_pred, y=None, **kwargs):
        raise NotImplementedError


def gaussian_kernel_2d(win_size, sigma):
    coords = torch.arange(win_size).float() - (win_size - 1) / 2
    g = torch.exp(-(coords ** 2) / (2 * sigma ** 2))
    g = g / g.sum()
    return (g[:, None] * g[None, :])[None, None]


class SSIMMetric(IterationMetric):
    def __init__(self, spatial_dims=2, data_range=1.0, win_size=7, kernel_sigma=1.5, k1=0.01, k2=0.03):
        self.spatial_dims = spatial_dims
        self.data_range = data_range
        self.win_size, self.kernel_sigma, self.k1, self.k2 = win_size, kernel_sigma, k1, k2

    def _compute_tensor(self, y_pred, y=None, **kwargs):
        c = y_pred.shape[1]
        kernel = gaussian_kernel_2d(self.win_size, self.kernel_sigma).repeat(c, 1, 1, 1)
        c1, c2 = (self.k1 * self.data_range) ** 2, (self.k2 * self.data_range) ** 2
        conv = lambda t: F.conv2d(t, kernel, groups=c)
        mu_x, mu_y = conv(y_pred), conv(y)
        sxx = conv(y_pred * y_pred) - mu_x ** 2
        syy = conv(y * y) - mu_y ** 2
        sxy = conv(y_pred * y) - mu_x * mu_y
        ssim_map = ((2 * mu_x * mu_y + c1) * (2 * sxy + c2)) / ((mu_x ** 2 + mu_y ** 2 + c1) * (sxx + syy + c2))
        return ssim_map.flatten(1).mean(1, keepdim=True)


class SSIMLoss(_Loss):
    def __init__(self, spatial_dims=2, data_range=1.0, win_size=7, kernel_sigma=1.5, reduction="mean"):
        super().__init__(reduction=reduction)
        self.spatial_dims = spatial_dims
        self.data_range = data_range
        self.win_size, self.kernel_sigma = win_size, kernel_sigma

    def forward(self, input, target):
        ssim_value = SSIMMetric(self.spatial_dims, self.data_range, self.win_size, self.kernel_sigma)(input, target)
        loss = 1 - ssim_value
        return loss.mean() if self.reduction == "mean" else loss.sum()


class DenoiseNet(nn.Module):
    def __init__(self, ch=16):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(1, ch, 3, padding=1), nn.PReLU(),
                                  nn.Conv2d(ch, ch, 3, padding=1), nn.PReLU(),
                                  nn.Conv2d(ch, ch, 3, padding=1), nn.PReLU(),
                                  nn.Conv2d(ch, 1, 3, padding=1))

    def forward(self, x):
        return x + self.body(x)


def make_images(n, g, size=24):
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, size), torch.linspace(-1, 1, size), indexing="ij")
    freq = 2 + 4 * torch.rand(n, 1, 1, generator=g)
    phase = 6.28 * torch.rand(n, 1, 1, generator=g)
    clean = 0.5 + 0.35 * torch.sin(freq * xx + phase) * torch.cos(freq * yy)
    clean = clean * (((xx ** 2 + yy ** 2) < 0.8).float() * 0.8 + 0.2)
    noisy = clean + 0.15 * torch.randn(clean.shape, generator=g)
    return noisy.unsqueeze(1), clean.unsqueeze(1)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    train_ds = TensorDataset(*make_images(384, g))
    val_x, val_y = make_images(64, g)
    train_loader = DataLoader(train_ds, batch_size=16, shuffle=True, generator=g)
    model = DenoiseNet()
    l1_loss = nn.L1Loss()
    ssim_loss = SSIMLoss(spatial_dims=2, data_range=1.0)
    ssim_weight = 0.5
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    ssim_metric = SSIMMetric(spatial_dims=2, data_range=1.0)
    for epoch in range(5):
        model.train()
        epoch_loss, epoch_ssim, step = 0.0, 0.0, 0
        for batch_data in train_loader:
            step += 1
            inputs, labels = batch_data
            optimizer.zero_grad()
            outputs = model(inputs)
            loss_ssim = ssim_loss(outputs, labels)
            loss = l1_loss(outputs, labels) + ssim_weight * loss_ssim
            loss.backward()
            optimizer.step()
            epoch_loss += loss.item()
            epoch_ssim += loss_ssim.item()
        model.eval()
        with torch.no_grad():
            val_ssim = ssim_metric(model(val_x), val_y).mean().item()
        print(f"epoch {epoch + 1} average loss: {epoch_loss / step:.4f} "
              f"(ssim term {epoch_ssim / step:.4f}) val SSIM {val_ssim:.4f}")


if __name__ == "__main__":
    main()
