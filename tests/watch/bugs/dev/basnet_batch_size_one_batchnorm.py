"""A boundary-aware salient object detection script in the shape of a BASNet training file: a
SalObjDataset with rescale / random-crop transforms, an encoder-decoder whose every decoder stage
(conv-BatchNorm-ReLU blocks) emits a sigmoid side output plus a residual refinement module on top,
a hybrid loss (BCE + SSIM + IoU) summed over all side outputs in muti_bce_loss_fusion(), and a flat
loop over epochs that calls zero_grad / forward / backward / step. The test part switches the net
to eval() and predicts one image at a time, as the test script does.

The run uses batch_size_train = 1 with a network normalized by BatchNorm. Each training forward
pass normalizes every channel with the statistics of a single image, and the running statistics the
eval-mode network uses are averages of those per-image statistics, which do not match what any
layer saw during training. The loss goes down, but the eval-mode saliency maps are far worse than
those of the same network with a batch-independent normalization.

Thread: https://github.com/xuebinqin/BASNet/issues/42
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


# ------- 1. define loss function --------

def gaussian_window(window_size, sigma=1.5):
    x = torch.arange(window_size, dtype=torch.float32) - window_size // 2
    g = torch.exp(-x ** 2 / (2 * sigma ** 2))
    g = (g / g.sum()).unsqueeze(1)
    return (g @ g.t()).unsqueeze(0).unsqueeze(0)


class SSIM(nn.Module):
    def __init__(self, window_size=11):
        super().__init__()
        self.window_size = window_size
        self.register_buffer("window", gaussian_window(window_size))

    def forward(self, img1, img2):
        pad = self.window_size // 2
        mu1 = F.conv2d(img1, self.window, padding=pad)
        mu2 = F.conv2d(img2, self.window, padding=pad)
        s11 = F.conv2d(img1 * img1, self.window, padding=pad) - mu1 ** 2
        s22 = F.conv2d(img2 * img2, self.window, padding=pad) - mu2 ** 2
        s12 = F.conv2d(img1 * img2, self.window, padding=pad) - mu1 * mu2
        c1, c2 = 0.01 ** 2, 0.03 ** 2
        ssim_map = ((2 * mu1 * mu2 + c1) * (2 * s12 + c2)) / ((mu1 ** 2 + mu2 ** 2 + c1) * (s11 + s22 + c2))
        return ssim_map.mean()


class IOU(nn.Module):
    def forward(self, pred, target):
        b = pred.shape[0]
        iou = 0.0
        for i in range(b):
            inter = torch.sum(target[i] * pred[i])
            union = torch.sum(target[i]) + torch.sum(pred[i]) - inter
            iou = iou + (1 - inter / union)
        return iou / b


bce_loss = nn.BCELoss()
ssim_loss = SSIM(window_size=11)
iou_loss = IOU()


def bce_ssim_loss(pred, target):
    return bce_loss(pred, target) + (1 - ssim_loss(pred, target)) + iou_loss(pred, target)


def muti_bce_loss_fusion(d0, d1, d2, d3, d4, labels_v):
    loss0 = bce_ssim_loss(d0, labels_v)
    loss1 = bce_ssim_loss(d1, labels_v)
    loss2 = bce_ssim_loss(d2, labels_v)
    loss3 = bce_ssim_loss(d3, labels_v)
    loss4 = bce_ssim_loss(d4, labels_v)
    loss = loss0 + loss1 + loss2 + loss3 + loss4
    return loss0, loss


# ------- 2. dataset --------

class SalObjDataset(Dataset):
    """Images with one salient blob (random colour, position, size) on a textured background."""

    def __init__(self, n, size=56, crop=48, train=True, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.size, self.crop, self.train = size, crop, train
        yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
        images, labels = [], []
        for _ in range(n):
            cy, cx = (torch.rand(2, generator=g) * 0.5 + 0.25) * size
            ry, rx = (torch.rand(2, generator=g) * 0.15 + 0.1) * size
            mask = ((((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2) <= 1).float()
            bg = torch.rand(3, 1, 1, generator=g) * 0.6
            fg = torch.rand(3, 1, 1, generator=g) * 0.6 + 0.4
            texture = F.avg_pool2d(torch.rand(1, 3, size, size, generator=g), 5, 1, 2)[0]
            img = bg * (1 - mask) + fg * mask + 0.35 * (texture - 0.5)
            images.append(img + 0.05 * torch.randn(3, size, size, generator=g))
            labels.append(mask.unsqueeze(0))
        self.images, self.labels = torch.stack(images), torch.stack(labels)
        self.g = torch.Generator().manual_seed(seed + 1)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        image, label = self.images[idx], self.labels[idx]
        if self.train:  # RandomCrop
            top, left = torch.randint(0, self.size - self.crop + 1, (2,), generator=self.g).tolist()
        else:  # CenterCrop
            top = left = (self.size - self.crop) // 2
        image = image[:, top:top + self.crop, left:left + self.crop]
        label = label[:, top:top + self.crop, left:left + self.crop]
        image = (image - torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)) / \
            torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
        return {"image": image, "label": label}


# ------- 3. model --------

def conv_bn_relu(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None if cin == cout else nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False),
                                                           nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.down is None else self.down(x)
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + identity)


class RefUnet(nn.Module):
    def __init__(self, ch=16):
        super().__init__()
        self.conv0 = nn.Conv2d(1, ch, 3, padding=1)
        self.enc1, self.enc2 = conv_bn_relu(ch, ch), conv_bn_relu(ch, ch)
        self.bridge = conv_bn_relu(ch, ch)
        self.dec2, self.dec1 = conv_bn_relu(2 * ch, ch), conv_bn_relu(2 * ch, ch)
        self.out = nn.Conv2d(ch, 1, 3, padding=1)

    def forward(self, x):
        hx = self.conv0(x)
        h1 = self.enc1(hx)
        h2 = self.enc2(F.max_pool2d(h1, 2))
        hb = self.bridge(F.max_pool2d(h2, 2))
        d2 = self.dec2(torch.cat([F.interpolate(hb, scale_factor=2, mode="bilinear"), h2], 1))
        d1 = self.dec1(torch.cat([F.interpolate(d2, scale_factor=2, mode="bilinear"), h1], 1))
        return x + self.out(d1)


class BASNet(nn.Module):
    def __init__(self, n_channels=3, n_classes=1, ch=16):
        super().__init__()
        self.inconv = conv_bn_relu(n_channels, ch)
        self.encoder1 = BasicBlock(ch, ch)
        self.encoder2 = BasicBlock(ch, 2 * ch)
        self.encoder3 = BasicBlock(2 * ch, 4 * ch)
        self.bridge = nn.Sequential(conv_bn_relu(4 * ch, 4 * ch), conv_bn_relu(4 * ch, 4 * ch))
        self.decoder3 = nn.Sequential(conv_bn_relu(8 * ch, 4 * ch), conv_bn_relu(4 * ch, 2 * ch))
        self.decoder2 = nn.Sequential(conv_bn_relu(4 * ch, 2 * ch), conv_bn_relu(2 * ch, ch))
        self.decoder1 = nn.Sequential(conv_bn_relu(2 * ch, ch), conv_bn_relu(ch, ch))
        self.outconvb = nn.Conv2d(4 * ch, n_classes, 3, padding=1)
        self.outconv3 = nn.Conv2d(2 * ch, n_classes, 3, padding=1)
        self.outconv2 = nn.Conv2d(ch, n_classes, 3, padding=1)
        self.outconv1 = nn.Conv2d(ch, n_classes, 3, padding=1)
        self.refunet = RefUnet(ch)

    def forward(self, x):
        size = x.shape[-2:]
        h1 = self.encoder1(self.inconv(x))                 # 48
        h2 = self.encoder2(F.max_pool2d(h1, 2))            # 24
        h3 = self.encoder3(F.max_pool2d(h2, 2))            # 12
        hb = self.bridge(F.max_pool2d(h3, 2))              # 6
        up = lambda t: F.interpolate(t, scale_factor=2, mode="bilinear")
        hd3 = self.decoder3(torch.cat([up(hb), h3], 1))
        hd2 = self.decoder2(torch.cat([up(hd3), h2], 1))
        hd1 = self.decoder1(torch.cat([up(hd2), h1], 1))
        db = F.interpolate(self.outconvb(hb), size=size, mode="bilinear")
        d3 = F.interpolate(self.outconv3(hd3), size=size, mode="bilinear")
        d2 = F.interpolate(self.outconv2(hd2), size=size, mode="bilinear")
        d1 = self.outconv1(hd1)
        dout = self.refunet(d1)
        return (torch.sigmoid(dout), torch.sigmoid(d1), torch.sigmoid(d2), torch.sigmoid(d3),
                torch.sigmoid(db))


# ------- 4. test --------

def run_test(net, test_dataloader):
    net.eval()
    mae, iou = 0.0, 0.0
    with torch.no_grad():
        for data_test in test_dataloader:
            inputs, labels = data_test["image"], data_test["label"]
            pred = net(inputs)[0]
            mae += (pred - labels).abs().mean().item()
            hard = (pred > 0.5).float()
            iou += ((hard * labels).sum() / ((hard + labels).clamp(max=1).sum() + 1e-8)).item()
    n = len(test_dataloader)
    return mae / n, iou / n


def main():
    torch.manual_seed(0)
    epoch_num = 3
    batch_size_train = 1
    salobj_dataset = SalObjDataset(80, train=True, seed=0)
    salobj_dataloader = DataLoader(salobj_dataset, batch_size=batch_size_train, shuffle=True,
                                   generator=torch.Generator().manual_seed(0))
    test_dataloader = DataLoader(SalObjDataset(40, train=False, seed=100), batch_size=1, shuffle=False)
    train_num = len(salobj_dataset)

    net = BASNet(3, 1)
    optimizer = torch.optim.Adam(net.parameters(), lr=0.001, betas=(0.9, 0.999), eps=1e-08, weight_decay=0)

    ite_num = 0
    running_loss = 0.0
    running_tar_loss = 0.0
    ite_num4val = 0
    for epoch in range(0, epoch_num):
        net.train()
        for i, data in enumerate(salobj_dataloader):
            ite_num = ite_num + 1
            ite_num4val = ite_num4val + 1
            inputs_v, labels_v = data["image"].float(), data["label"].float()

            optimizer.zero_grad()
            d0, d1, d2, d3, d4 = net(inputs_v)
            loss2, loss = muti_bce_loss_fusion(d0, d1, d2, d3, d4, labels_v)
            loss.backward()
            optimizer.step()

            running_loss += loss.item()
            running_tar_loss += loss2.item()
            if ite_num % 20 == 0:
                print("[epoch: %3d/%3d, batch: %5d/%5d, ite: %d] train loss: %3f, tar: %3f " % (
                    epoch + 1, epoch_num, (i + 1) * batch_size_train, train_num, ite_num,
                    running_loss / ite_num4val, running_tar_loss / ite_num4val))
                running_loss = 0.0
                running_tar_loss = 0.0
                ite_num4val = 0

    mae, iou = run_test(net, test_dataloader)
    print(f"test (eval mode, one image at a time): MAE {mae:.4f}  IoU {iou:.4f}")


if __name__ == "__main__":
    main()
