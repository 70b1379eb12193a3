"""A DANN script for MNIST -> MNIST-M: one img_transform (RandomResizedCrop(28), ToTensor-like
scaling, Normalize(0.5, 0.5)) is built at module level and given to the source dataset and the
target dataset, and test(dataset_name, epoch) builds its evaluation dataset with the same
RandomResizedCrop transform. CNNModel has a feature extractor, a label classifier and a domain
classifier behind a ReverseLayerF, both heads end in LogSoftmax and use NLLLoss; the loop draws one
source and one target batch per step, ramps alpha with 2/(1+exp(-10p))-1, zeroes the grads, sums the
three losses and steps Adam. Every training and every test image is a random crop of 8-100% of the
digit, resized back to 28x28, so the model trains on crops and is scored on random crops: the
reported target accuracy is low and changes from one evaluation to the next.

Thread: https://github.com/fungtion/DANN/issues/1
"""
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

image_size = 28
batch_size = 64
n_epoch = 4
lr = 1e-3


def random_resized_crop(img, size, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    _, h, w = img.shape
    for _ in range(10):
        area = h * w * float(torch.empty(1).uniform_(*scale))
        aspect = math.exp(float(torch.empty(1).uniform_(math.log(ratio[0]), math.log(ratio[1]))))
        cw, ch = int(round(math.sqrt(area * aspect))), int(round(math.sqrt(area / aspect)))
        if 0 < cw <= w and 0 < ch <= h:
            i = int(torch.randint(0, h - ch + 1, (1,)))
            j = int(torch.randint(0, w - cw + 1, (1,)))
            crop = img[:, i:i + ch, j:j + cw]
            return F.interpolate(crop[None], size=(size, size), mode="bilinear", align_corners=False)[0]
    return img


def img_transform(img):
    img = random_resized_crop(img, image_size)
    return (img - 0.5) / 0.5


GLYPHS = (torch.rand(10, 1, 7, 7, generator=torch.Generator().manual_seed(3)) > 0.55).float()


class DigitSet(Dataset):
    def __init__(self, n, seed, colored, transform):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 10, (n,), generator=g)
        strokes = F.interpolate(GLYPHS[self.labels], size=(20, 20), mode="nearest")
        digits = F.pad(strokes, (4, 4, 4, 4)).expand(-1, 3, -1, -1)
        if colored:
            bg = torch.rand(n, 3, 1, 1, generator=g) * 0.8 + 0.1 * torch.rand(n, 3, 28, 28, generator=g)
            digits = (bg - digits).abs()
        self.images = (digits + 0.05 * torch.randn(n, 3, 28, 28, generator=g)).clamp(0, 1)
        self.transform = transform

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.transform(self.images[idx]), self.labels[idx]


class ReverseLayerF(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.neg() * ctx.alpha, None


class CNNModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.feature = nn.Sequential(
            nn.Conv2d(3, 32, 5), nn.BatchNorm2d(32), nn.MaxPool2d(2), nn.ReLU(True),
            nn.Conv2d(32, 48, 5), nn.BatchNorm2d(48), nn.Dropout2d(), nn.MaxPool2d(2), nn.ReLU(True))
        self.class_classifier = nn.Sequential(
            nn.Linear(48 * 16, 100), nn.BatchNorm1d(100), nn.ReLU(True), nn.Dropout(),
            nn.Linear(100, 100), nn.BatchNorm1d(100), nn.ReLU(True), nn.Linear(100, 10), nn.LogSoftmax(dim=1))
        self.domain_classifier = nn.Sequential(
            nn.Linear(48 * 16, 100), nn.BatchNorm1d(100), nn.ReLU(True), nn.Linear(100, 2), nn.LogSoftmax(dim=1))

    def forward(self, input_data, alpha):
        feature = self.feature(input_data).view(-1, 48 * 16)
        reverse_feature = ReverseLayerF.apply(feature, alpha)
        return self.class_classifier(feature), self.domain_classifier(reverse_feature)


def test(my_net, dataset_name, epoch):
    dataset = DigitSet(600, 11 if dataset_name == "mnist" else 12, dataset_name == "mnist_m", img_transform)
    dataloader = DataLoader(dataset, batch_size=128, shuffle=False)
    my_net.eval()
    n_correct = n_total = 0
    with torch.no_grad():
        for t_img, t_label in dataloader:
            class_output, _ = my_net(input_data=t_img, alpha=0)
            n_correct += (class_output.argmax(1) == t_label).sum().item()
            n_total += len(t_label)
    my_net.train()
    print(f"epoch: {epoch}, accuracy of the {dataset_name} dataset: {n_correct / n_total:.4f}")


def main():
    torch.manual_seed(0)
    dataloader_source = DataLoader(DigitSet(1280, 1, False, img_transform), batch_size=batch_size, shuffle=True)
    dataloader_target = DataLoader(DigitSet(1280, 2, True, img_transform), batch_size=batch_size, shuffle=True)
    my_net = CNNModel()
    optimizer = torch.optim.Adam(my_net.parameters(), lr=lr)
    loss_class, loss_domain = nn.NLLLoss(), nn.NLLLoss()
    for epoch in range(n_epoch):
        len_dataloader = min(len(dataloader_source), len(dataloader_target))
        data_source_iter, data_target_iter = iter(dataloader_source), iter(dataloader_target)
        for i in range(len_dataloader):
            p = float(i + epoch * len_dataloader) / n_epoch / len_dataloader
            alpha = 2. / (1. + np.exp(-10 * p)) - 1
            s_img, s_label = next(data_source_iter)
            my_net.zero_grad()
            class_output, domain_output = my_net(input_data=s_img, alpha=alpha)
            err_s_label = loss_class(class_output, s_label)
            err_s_domain = loss_domain(domain_output, torch.zeros(len(s_img), dtype=torch.long))
            t_img, _ = next(data_target_iter)
            _, domain_output = my_net(input_data=t_img, alpha=alpha)
            err_t_domain = loss_domain(domain_output, torch.ones(len(t_img), dtype=torch.long))
            err = err_t_domain + err_s_domain + err_s_label
            err.backward()
            optimizer.step()
        print(f"epoch {epoch} err_s_label {err_s_label.item():.4f} err_s_domain {err_s_domain.item():.4f} "
              f"err_t_domain {err_t_domain.item():.4f}")
        test(my_net, "mnist", epoch)
        test(my_net, "mnist_m", epoch)


if __name__ == "__main__":
    main()
