"""
Shape: a flat differential-privacy fine-tuning script: CIFAR-10 loader and a BCELoss criterion at module level, then under `if __name__ == "__main__":` a pretrained torchvision densenet121 gets a new Linear+Sigmoid classifier, Adam is built over the parameters that require grad, and, when the DP flag is set, the model is passed through opacus ModuleValidator.fix (which swaps every BatchNorm for a new GroupNorm) and PrivacyEngine.make_private(module, optimizer, data_loader, ...) before a plain epoch loop with one-hot targets.
Bug: ModuleValidator.fix(model) runs after the optimizer was built from model.parameters(), so the GroupNorm layers it creates are not in the optimizer; the private optimizer then fails with "Per sample gradient is not initialized" (their parameters would never be updated), and building the optimizer after fix() resolves it.
Thread: https://github.com/meta-pytorch/opacus/issues/431
"""
import torch
import torch.nn.functional as F
import torchvision.transforms as T
from opacus import PrivacyEngine
from opacus.validators import ModuleValidator
from torch import nn
from torchvision import models
from torchvision.datasets import CIFAR10

cifar = CIFAR10(root="data/", download=True, transform=T.ToTensor())
loader = torch.utils.data.DataLoader(cifar, batch_size=8, shuffle=True, num_workers=20, pin_memory=True)

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
loss_fn = nn.BCELoss().to(device)
private = True
EPOCHS = 5


def build_net(n_classes=10):
    net = models.densenet121(pretrained=True)
    width = net.classifier.in_features
    net.classifier = nn.Sequential(nn.Linear(width, n_classes), nn.Sigmoid())
    return net


if __name__ == "__main__":
    net = build_net()
    opt = torch.optim.Adam(params=filter(lambda p: p.requires_grad, net.parameters()), lr=0.01)

    if private:
        problems = ModuleValidator.validate(net, strict=False)
        if problems:
            net = ModuleValidator.fix(net)
        engine = PrivacyEngine()
        net, opt, loader = engine.make_private(
            module=net,
            optimizer=opt,
            data_loader=loader,
            noise_multiplier=1.1,
            max_grad_norm=1.0,
        )
    net = net.to(device)

    for epoch in range(EPOCHS):
        net.train()
        seen, total = 0, 0.0
        for imgs, labels in loader:
            imgs = imgs.to(device)
            targets = F.one_hot(labels, num_classes=10).float().to(device)
            opt.zero_grad()
            probs = net(imgs)
            loss = loss_fn(probs, targets)
            loss.backward()
            opt.step()
            total += loss.item() * imgs.size(0)
            seen += imgs.size(0)
        print("epoch", epoch, "loss", total / max(seen, 1))
