"""A 3D U-Net segmentation trainer: UNet3DTrainer.fit() runs train(loader) epochs; train() does
zero_grad/backward/step per batch through a _forward_pass(input, target) helper and every
validate_after_iters iterations calls validate(), which puts the model in eval mode under no_grad
and reports the mean validation loss and Dice score, then steps ReduceLROnPlateau on the score.
The model applies its final_activation (a sigmoid, final_sigmoid=True) in forward() whenever
self.training is False, and the loss criterion is BCEWithLogitsLoss, so in validation the sigmoid
is applied twice: once by the model and once inside the loss. The reported validation loss is
computed on probabilities squeezed into (0.5, 0.73) and no longer tracks the training loss.

Thread: https://github.com/wolny/pytorch-3dunet/issues/45
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class DoubleConv(nn.Module):
    """conv + ReLU + GroupNorm twice ('crg' layer order)."""

    def __init__(self, cin, cout, num_groups=4):
        super().__init__()
        self.block = nn.Sequential(
            nn.Conv3d(cin, cout, 3, padding=1), nn.ReLU(), nn.GroupNorm(num_groups, cout),
            nn.Conv3d(cout, cout, 3, padding=1), nn.ReLU(), nn.GroupNorm(num_groups, cout))

    def forward(self, x):
        return self.block(x)


class UNet3D(nn.Module):
    def __init__(self, in_channels, out_channels, final_sigmoid, f_maps=(8, 16)):
        super().__init__()
        self.enc1 = DoubleConv(in_channels, f_maps[0])
        self.enc2 = DoubleConv(f_maps[0], f_maps[1])
        self.pool = nn.MaxPool3d(2)
        self.up = nn.Upsample(scale_factor=2, mode='nearest')
        self.dec1 = DoubleConv(f_maps[0] + f_maps[1], f_maps[0])
        self.final_conv = nn.Conv3d(f_maps[0], out_channels, 1)
        self.final_activation = nn.Sigmoid() if final_sigmoid else nn.Softmax(dim=1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(self.pool(e1))
        x = self.final_conv(self.dec1(torch.cat([e1, self.up(e2)], dim=1)))
        # normalize the logits only for prediction; in training the network outputs logits
        if not self.training:
            x = self.final_activation(x)
        return x


class DiceCoefficient:
    def __call__(self, probs, target, eps=1e-6):
        pred = (probs > 0.5).float()
        return (2 * (pred * target).sum() / (pred.sum() + target.sum()).clamp(min=eps))


class RunningAverage:
    def __init__(self):
        self.count, self.sum, self.avg = 0, 0.0, 0.0

    def update(self, value, n=1):
        self.count += n
        self.sum += value * n
        self.avg = self.sum / self.count


class UNet3DTrainer:
    def __init__(self, model, optimizer, lr_scheduler, loss_criterion, eval_criterion, loaders,
                 max_num_epochs=4, validate_after_iters=20, log_after_iters=10):
        self.model = model
        self.optimizer = optimizer
        self.scheduler = lr_scheduler
        self.loss_criterion = loss_criterion
        self.eval_criterion = eval_criterion
        self.loaders = loaders
        self.max_num_epochs = max_num_epochs
        self.validate_after_iters = validate_after_iters
        self.log_after_iters = log_after_iters
        self.num_iterations = 1
        self.num_epoch = 0

    def fit(self):
        for _ in range(self.num_epoch, self.max_num_epochs):
            self.train(self.loaders['train'])
            self.num_epoch += 1

    def train(self, train_loader):
        train_losses = RunningAverage()
        self.model.train()
        for input, target in train_loader:
            output, loss = self._forward_pass(input, target)
            train_losses.update(loss.item(), input.size(0))
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()

            if self.num_iterations % self.validate_after_iters == 0:
                eval_score = self.validate(self.loaders['val'])
                self.scheduler.step(eval_score)

            if self.num_iterations % self.log_after_iters == 0:
                print(f'iter {self.num_iterations} epoch {self.num_epoch} train loss {train_losses.avg:.4f}')
            self.num_iterations += 1

    def validate(self, val_loader):
        val_losses, val_scores = RunningAverage(), RunningAverage()
        try:
            # evaluation mode: final_activation is applied by the model itself
            self.model.eval()
            with torch.no_grad():
                for input, target in val_loader:
                    output, loss = self._forward_pass(input, target)
                    val_losses.update(loss.item(), input.size(0))
                    val_scores.update(self.eval_criterion(output, target).item(), input.size(0))
            print(f'validation loss {val_losses.avg:.4f} dice {val_scores.avg:.4f}')
            return val_scores.avg
        finally:
            self.model.train()

    def _forward_pass(self, input, target):
        output = self.model(input)
        return output, self.loss_criterion(output, target)


def blob_volumes(n, seed, size=16):
    g = torch.Generator().manual_seed(seed)
    zz, yy, xx = torch.meshgrid(*(torch.arange(size).float(),) * 3, indexing='ij')
    centres = torch.rand(n, 3, generator=g) * (size - 6) + 3
    radii = torch.rand(n, generator=g) * 2 + 2.5
    dist = ((zz - centres[:, 0, None, None, None]) ** 2 + (yy - centres[:, 1, None, None, None]) ** 2
            + (xx - centres[:, 2, None, None, None]) ** 2).sqrt()
    mask = (dist < radii[:, None, None, None]).float().unsqueeze(1)
    raw = mask + 0.4 * torch.randn(n, 1, size, size, size, generator=g)
    return TensorDataset(raw, mask)


def main():
    torch.manual_seed(0)
    loaders = {
        'train': DataLoader(blob_volumes(80, 0), batch_size=4, shuffle=True,
                            generator=torch.Generator().manual_seed(0)),
        'val': DataLoader(blob_volumes(16, 1), batch_size=4),
    }
    model = UNet3D(in_channels=1, out_channels=1, final_sigmoid=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3, weight_decay=1e-5)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode='max', factor=0.5, patience=5)
    trainer = UNet3DTrainer(model, optimizer, scheduler, nn.BCEWithLogitsLoss(), DiceCoefficient(), loaders)
    trainer.fit()


if __name__ == '__main__':
    main()
