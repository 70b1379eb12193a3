"""ShuffleNet-Series-style fine-tuning: the network class loads the released ImageNet checkpoint itself
(torch.load(...)['state_dict'] then self.load_state_dict(..., strict=False), so that the new classifier for
the user's classes does not raise), and training runs through train(model, device, args, val_interval,
all_iters) with a DataIterator over the loader, SGD + momentum, a linear-decay LambdaLR and a validate()
helper. The released checkpoint was saved from an nn.DataParallel model, so every key starts with "module.";
none of them matches the bare model's names, strict=False turns all of them into missing/unexpected keys
without a word, and the "fine-tune" is in fact training from random weights: the loss falls as slowly as
without the pretrained model. Fix: strip the "module." prefix (and drop the old classifier) before loading.
Thread: https://github.com/megvii-model/ShuffleNet-Series/issues/37
"""
import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

IN_DIM, FEAT = 32, 8


def latent(x):
    g = torch.Generator().manual_seed(123)
    a = torch.randn(IN_DIM, FEAT, generator=g) / IN_DIM ** 0.5
    return torch.tanh(3.0 * x @ a)                           # shared features both tasks are built on


def make_task(n, n_class, head_seed, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, IN_DIM, generator=g)
    c = torch.randn(FEAT, n_class, generator=torch.Generator().manual_seed(head_seed))
    y = (latent(x) @ c).argmax(1)
    return torch.utils.data.TensorDataset(x, y)


class ShuffleNetLike(nn.Module):
    def __init__(self, n_class=1000, pretrained_path=None):
        super().__init__()
        self.first_conv = nn.Sequential(nn.Linear(IN_DIM, 128), nn.BatchNorm1d(128), nn.ReLU())
        self.features = nn.Sequential(nn.Linear(128, 128), nn.BatchNorm1d(128), nn.ReLU(),
                                      nn.Linear(128, 64), nn.BatchNorm1d(64), nn.ReLU())
        self.classifier = nn.Linear(64, n_class)
        if pretrained_path is not None:
            self.init_weights(pretrained_path)

    def init_weights(self, path):
        pretrained_state_dict = torch.load(path, map_location="cpu")["state_dict"]
        result = self.load_state_dict(pretrained_state_dict, strict=False)   # skip the 1000-way classifier
        print(f"loaded pretrained weights from {os.path.basename(path)}")
        return result

    def forward(self, x):
        return self.classifier(self.features(self.first_conv(x)))


class DataIterator:
    def __init__(self, dataloader):
        self.dataloader = dataloader
        self.iterator = iter(self.dataloader)

    def next(self):
        try:
            data = next(self.iterator)
        except StopIteration:
            self.iterator = iter(self.dataloader)
            data = next(self.iterator)
        return data[0], data[1]


class Args:
    pass


def train(model, device, args, *, val_interval, all_iters=0):
    optimizer, loss_function, scheduler = args.optimizer, args.loss_function, args.scheduler
    model.train()
    for _ in range(val_interval):
        all_iters += 1
        data, target = args.train_dataprovider.next()
        data, target = data.to(device), target.to(device)
        output = model(data)
        loss = loss_function(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        if all_iters % args.display_interval == 0:
            acc = (output.argmax(1) == target).float().mean().item()
            print(f"TRAIN Iter {all_iters}: lr = {scheduler.get_last_lr()[0]:.5f}, loss = {loss.item():.4f}, "
                  f"top-1 err = {1 - acc:.3f}")
    return all_iters


@torch.no_grad()
def validate(model, device, args, *, all_iters):
    model.eval()
    correct, total, loss_sum = 0, 0, 0.0
    for data, target in args.val_loader:
        output = model(data.to(device))
        loss_sum += args.loss_function(output, target).item() * len(target)
        correct += (output.argmax(1) == target).sum().item()
        total += len(target)
    print(f"TEST Iter {all_iters}: loss = {loss_sum / total:.4f}, top-1 err = {1 - correct / total:.3f}")
    return correct / total


def pretrain_and_release(path):
    """The authors' side: train on the big source task under nn.DataParallel and save its state_dict."""
    torch.manual_seed(0)
    net = nn.DataParallel(ShuffleNetLike(n_class=64))
    src = make_task(8192, 64, head_seed=5, seed=10)
    loader = torch.utils.data.DataLoader(src, batch_size=128, shuffle=True,
                                         generator=torch.Generator().manual_seed(0))
    opt = torch.optim.SGD(net.parameters(), lr=0.2, momentum=0.9, weight_decay=4e-5)
    net.train()
    for _ in range(8):
        for x, y in loader:
            opt.zero_grad()
            F.cross_entropy(net(x), y).backward()
            opt.step()
    torch.save({"state_dict": net.state_dict()}, path)


def main():
    device = torch.device("cpu")
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = os.path.join(tmp, "ShuffleNetV2.1.0x.pth.tar")
        pretrain_and_release(ckpt)

        # the user's fine-tuning run on a small labelled set with its own 5 classes
        torch.manual_seed(1)
        args = Args()
        args.display_interval, args.total_iters = 50, 300
        train_set = make_task(256, 5, head_seed=9, seed=20)
        val_set = make_task(2048, 5, head_seed=9, seed=21)
        train_loader = torch.utils.data.DataLoader(train_set, batch_size=32, shuffle=True,
                                                   generator=torch.Generator().manual_seed(1))
        args.train_dataprovider = DataIterator(train_loader)
        args.val_loader = torch.utils.data.DataLoader(val_set, batch_size=256)

        model = ShuffleNetLike(n_class=5, pretrained_path=ckpt).to(device)
        args.optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, weight_decay=4e-5)
        args.loss_function = nn.CrossEntropyLoss()
        args.scheduler = torch.optim.lr_scheduler.LambdaLR(
            args.optimizer, lambda step: (1.0 - step / args.total_iters) if step <= args.total_iters else 0)

        all_iters = 0
        while all_iters < args.total_iters:
            all_iters = train(model, device, args, val_interval=100, all_iters=all_iters)
            acc = validate(model, device, args, all_iters=all_iters)
        print(f"final val top-1 acc: {acc:.3f}")


if __name__ == "__main__":
    main()
