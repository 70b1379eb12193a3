"""A segmentation training function whose CosineAnnealingLR is sized in epochs (T_max=num_epochs) but
stepped inside the batch loop, so the learning rate reaches zero after num_epochs batches, a few
epochs into a long run, and then swings back up.

Thread: https://github.com/ivadomed/ivadomed/pull/55
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def dice_loss(pred, target, smooth=1.0):
    pred = torch.sigmoid(pred).flatten(1)
    target = target.flatten(1)
    inter = (pred * target).sum(1)
    return 1 - ((2 * inter + smooth) / (pred.sum(1) + target.sum(1) + smooth)).mean()


def make_model():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, 1, 1))


def cmd_train(context, train_loader):
    model = make_model()
    num_epochs = context["num_epochs"]
    optimizer = torch.optim.Adam(model.parameters(), lr=context["initial_lr"])
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, num_epochs)
    for epoch in range(1, num_epochs + 1):
        model.train()
        train_loss_total = 0.0
        for input_samples, gt_samples in train_loader:
            preds = model(input_samples)
            loss = dice_loss(preds, gt_samples)
            train_loss_total += loss.item()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
        lr = scheduler.get_last_lr()[0]
        print(f"epoch {epoch} lr {lr:.2e} dice loss {train_loss_total / len(train_loader):.4f}")
    return model


def toy_segmentation(n=128, seed=0):
    g = torch.Generator().manual_seed(seed)
    masks = torch.zeros(n, 1, 24, 24)
    for i in range(n):
        r, c = torch.randint(4, 16, (2,), generator=g).tolist()
        masks[i, 0, r:r + 6, c:c + 6] = 1
    images = masks * 1.0 + 0.6 * torch.randn(n, 1, 24, 24, generator=g)
    return TensorDataset(images, masks)


def main():
    torch.manual_seed(0)
    loader = DataLoader(toy_segmentation(), batch_size=16, shuffle=True,
                        generator=torch.Generator().manual_seed(0))
    cmd_train({"num_epochs": 30, "initial_lr": 1e-2}, loader)


if __name__ == "__main__":
    main()
