"""A GreedyHash (NeurIPS 2018) training script in the style of a deep-hashing model zoo: a
get_config() dict (SGD type and params, epoch_lr_decrease, alpha, bit_list, test_map interval), an
AlexNet-like backbone whose last layer outputs `bit` continuous values u, and a GreedyHashLoss(config,
bit) nn.Module that owns its own classifier self.fc = Linear(bit, n_class, bias=False): it binarizes u
with a sign function whose backward passes the gradient straight through, classifies the codes with
fc and CrossEntropyLoss, and adds alpha * |(|u| - 1)^3| as the quantization penalty. train_val builds
the optimizer as config["optimizer"]["type"](net.parameters(), ...) before creating the loss, so the
loss module's fc weights are never handed to any optimizer: the classifier that gives the codes their
meaning stays at its random initialization for the whole run, and the backbone has to fit codes to a
fixed random projection, converging slowly to a worse retrieval mAP. Nothing raises.

Thread: https://github.com/swuxyj/DeepHash-pytorch/pull/32
"""
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
SIZE = 16


def get_config():
    return {
        "alpha": 0.1,
        "optimizer": {"type": optim.SGD, "epoch_lr_decrease": 6,
                      "optim_params": {"lr": 0.01, "weight_decay": 5e-4, "momentum": 0.9}},
        "info": "[GreedyHash]",
        "batch_size": 64,
        "epoch": 8,
        "test_map": 2,
        "topK": 500,
        "n_class": 10,
        "bit_list": [32],
    }


class ImageList(Dataset):
    """Ten classes of noisy colour templates; returns (image, one-hot label, index)."""

    def __init__(self, n, seed, n_class=10):
        g = torch.Generator().manual_seed(seed)
        templates = torch.rand(n_class, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(5))
        self.labels = torch.randint(0, n_class, (n,), generator=g)
        imgs = 0.45 * templates[self.labels] + 0.55 * torch.rand(n, 3, SIZE, SIZE, generator=g)
        self.imgs = (imgs - 0.5) / 0.25
        self.onehot = torch.eye(n_class)[self.labels]

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.imgs[i], self.onehot[i], i


def get_data(config):
    bs = config["batch_size"]
    train_set, test_set, database = ImageList(2000, 1), ImageList(300, 2), ImageList(1500, 3)
    return (DataLoader(train_set, batch_size=bs, shuffle=True, generator=torch.Generator().manual_seed(4)),
            DataLoader(test_set, batch_size=bs), DataLoader(database, batch_size=bs),
            len(train_set), len(test_set), len(database))


class AlexNet(nn.Module):
    def __init__(self, hash_bit):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2))
        self.classifier = nn.Sequential(nn.Dropout(0.3), nn.Linear(64 * 4 * 4, 256), nn.ReLU(inplace=True))
        self.hash_layer = nn.Linear(256, hash_bit)

    def forward(self, x):
        return self.hash_layer(self.classifier(self.features(x).flatten(1)))


class GreedyHashLoss(nn.Module):
    def __init__(self, config, bit):
        super().__init__()
        self.fc = nn.Linear(bit, config["n_class"], bias=False)
        self.criterion = nn.CrossEntropyLoss()

    def forward(self, u, onehot_y, ind, config):
        b = GreedyHashLoss.Hash.apply(u)
        y = onehot_y.argmax(axis=1)
        y_pre = self.fc(b)
        loss1 = self.criterion(y_pre, y)
        loss2 = config["alpha"] * (u.abs() - 1).pow(3).abs().mean()
        return loss1 + loss2

    class Hash(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            return input.sign()

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output


def compute_result(dataloader, net):
    net.eval()
    bs, clses = [], []
    with torch.no_grad():
        for img, cls, _ in dataloader:
            bs.append(net(img).sign())
            clses.append(cls)
    return torch.cat(bs), torch.cat(clses)


def calc_topk_map(q_b, r_b, q_l, r_l, topk):
    aps = []
    for i in range(q_b.shape[0]):
        gnd = (q_l[i] @ r_l.T > 0).astype(np.float32)
        ham = 0.5 * (q_b.shape[1] - q_b[i] @ r_b.T)
        gnd = gnd[np.argsort(ham, kind="stable")][:topk]
        if gnd.sum() == 0:
            continue
        count = np.arange(1, gnd.sum() + 1)
        pos = np.nonzero(gnd)[0] + 1.0
        aps.append(np.mean(count / pos))
    return float(np.mean(aps))


def train_val(config, bit):
    train_loader, test_loader, dataset_loader, num_train, num_test, num_dataset = get_data(config)
    config["num_train"] = num_train
    net = AlexNet(bit)

    optimizer = config["optimizer"]["type"](net.parameters(), **(config["optimizer"]["optim_params"]))

    criterion = GreedyHashLoss(config, bit)

    best_map = 0.0
    for epoch in range(config["epoch"]):
        lr = config["optimizer"]["optim_params"]["lr"] * (0.1 ** (epoch // config["optimizer"]["epoch_lr_decrease"]))
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr

        net.train()
        train_loss = 0.0
        for image, label, ind in train_loader:
            optimizer.zero_grad()
            u = net(image)
            loss = criterion(u, label.float(), ind, config)
            train_loss += loss.item()
            loss.backward()
            optimizer.step()
        print("%s[%2d/%2d] bit:%d, lr:%.5f, loss:%.3f" % (config["info"], epoch + 1, config["epoch"], bit, lr,
                                                        train_loss / len(train_loader)))

        if (epoch + 1) % config["test_map"] == 0:
            tst_binary, tst_label = compute_result(test_loader, net)
            trn_binary, trn_label = compute_result(dataset_loader, net)
            mAP = calc_topk_map(tst_binary.numpy(), trn_binary.numpy(), tst_label.numpy(), trn_label.numpy(),
                                config["topK"])
            best_map = max(best_map, mAP)
            print("%s epoch:%d, bit:%d, MAP:%.3f, Best MAP: %.3f" % (config["info"], epoch + 1, bit, mAP, best_map))


if __name__ == "__main__":
    config = get_config()
    for bit in config["bit_list"]:
        train_val(config, bit)
