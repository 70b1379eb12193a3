"""Binary segmentation trained with a kornia-0.5-style BinaryFocalLossWithLogits, gamma=0.5.

Shape of the user's code: a small conv net producing one logit map (N, 1, H, W),
a `BinaryFocalLossWithLogits(alpha=0.25, gamma=0.5, reduction="mean")` criterion
module wrapping `binary_focal_loss_with_logits(input, target, ...)`, and a plain
loop: zero_grad, forward, criterion(logits, mask), backward, Adam step, with the
loss printed every few iterations.
Bug: the focal factor is `torch.pow(1 - probs, gamma)` with no epsilon inside the
power. Once the network is confident on some foreground pixels, sigmoid(logit)
rounds to exactly 1.0 in float32, the base of the power is 0, and the derivative
gamma * 0**(gamma - 1) is inf; multiplied by the zero from log(1) it gives NaN.
One NaN gradient makes Adam write NaN into every weight, so from then on the loss
is NaN and the model predicts nothing, without any exception.
Thread: https://github.com/kornia/kornia/issues/918
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def binary_focal_loss_with_logits(input, target, alpha=0.25, gamma=2.0, reduction="none", eps=1e-8):
    probs = torch.sigmoid(input)
    target = target.unsqueeze(dim=1)
    loss_tmp = -alpha * torch.pow((1.0 - probs), gamma) * target * torch.log(probs + eps) - (
        1 - alpha
    ) * torch.pow(probs, gamma) * (1.0 - target) * torch.log(1.0 - probs + eps)
    loss_tmp = loss_tmp.squeeze(dim=1)
    if reduction == "none":
        return loss_tmp
    if reduction == "mean":
        return torch.mean(loss_tmp)
    if reduction == "sum":
        return torch.sum(loss_tmp)
    raise NotImplementedError(reduction)


class BinaryFocalLossWithLogits(nn.Module):
    def __init__(self, alpha, gamma=2.0, reduction="none"):
        super().__init__()
        self.alpha, self.gamma, self.reduction = alpha, gamma, reduction
        self.eps = 1e-8

    def forward(self, input, target):
        return binary_focal_loss_with_logits(input, target, self.alpha, self.gamma, self.reduction, self.eps)


class TinySegNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1)
        self.head = nn.Conv2d(16, 1, 1)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        return self.head(x)


def make_batch(gen, n=16, size=24):
    yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
    cy = torch.randint(4, size - 4, (n, 1, 1), generator=gen)
    cx = torch.randint(4, size - 4, (n, 1, 1), generator=gen)
    r = torch.randint(3, 7, (n, 1, 1), generator=gen)
    mask = (((yy - cy) ** 2 + (xx - cx) ** 2) <= r ** 2).float()
    # raw sensor intensities, not normalised: bright blobs on a noisy background
    image = 40.0 * mask + 8.0 * torch.rand(n, size, size, generator=gen)
    return image.unsqueeze(1), mask


def iou(logits, mask):
    pred = (logits.squeeze(1) > 0).float()
    inter = (pred * mask).sum()
    union = ((pred + mask) > 0).float().sum()
    return (inter / union.clamp(min=1)).item()


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    model = TinySegNet()
    criterion = BinaryFocalLossWithLogits(alpha=0.25, gamma=0.5, reduction="mean")
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    val_x, val_y = make_batch(torch.Generator().manual_seed(123), n=64)

    for it in range(200):
        x, y = make_batch(gen)
        optimizer.zero_grad()
        logits = model(x)
        loss = criterion(logits, y)
        loss.backward()
        optimizer.step()
        if it % 25 == 0 or it == 199:
            with torch.no_grad():
                vl = model(val_x)
            print(f"iter {it:3d} loss {loss.item():.5f} max logit {logits.max().item():8.2f} "
                  f"val IoU {iou(vl, val_y):.3f}")

    with torch.no_grad():
        vl = model(val_x)
        val_loss = criterion(vl, val_y).item()
    nan_params = sum(torch.isnan(p).any().item() for p in model.parameters())
    print(f"final val loss {val_loss:.5f} val IoU {iou(vl, val_y):.3f} "
          f"params containing NaN: {nan_params}/{len(list(model.parameters()))}")


if __name__ == "__main__":
    main()
