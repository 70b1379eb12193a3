"""A distillation train_step(opt, train_loader, nets, optimizer, criterions, epoch) helper in which
the student is pulled toward the teacher's attention maps; the summed attention loss is detached
before being added to the classification loss, so that term sends no gradient and the student
learns from the labels alone.

Thread: https://github.com/bboylyg/NAD/issues/8
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class WRN(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.block1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.block2 = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU())
        self.block3 = nn.Sequential(nn.Conv2d(16, 16, 3, stride=2, padding=1), nn.ReLU())
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x):
        a1 = self.block1(x)
        a2 = self.block2(a1)
        a3 = self.block3(a2)
        return a1, a2, a3, self.fc(a3.mean((2, 3)))


class AT(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def attention_map(self, fm, eps=1e-6):
        am = fm.pow(self.p).mean(1, keepdim=True)
        return am / (am.flatten(1).norm(dim=1).view(-1, 1, 1, 1) + eps)

    def forward(self, fm_s, fm_t):
        return F.mse_loss(self.attention_map(fm_s), self.attention_map(fm_t))


def train_step(opt, train_loader, nets, optimizer, criterions, epoch):
    snet, tnet = nets["snet"], nets["tnet"]
    criterion_cls, criterion_at = criterions["criterionCls"], criterions["criterionAT"]
    snet.train()
    for idx, (img, target) in enumerate(train_loader):
        activation1_s, activation2_s, activation3_s, output_s = snet(img)
        with torch.no_grad():
            activation1_t, activation2_t, activation3_t, _ = tnet(img)
        cls_loss = criterion_cls(output_s, target)
        at1_loss = criterion_at(activation1_s, activation1_t) * opt["beta1"]
        at2_loss = criterion_at(activation2_s, activation2_t) * opt["beta2"]
        at3_loss = criterion_at(activation3_s, activation3_t) * opt["beta3"]
        at_loss = (at1_loss + at2_loss + at3_loss).detach() + cls_loss
        optimizer.zero_grad()
        at_loss.backward()
        optimizer.step()
        if idx % 20 == 0:
            print(f"epoch {epoch} iter {idx} cls {cls_loss.item():.4f} "
                  f"at {(at1_loss + at2_loss + at3_loss).item():.4f}")


def images(n=1024, seed=0):
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(10, 3, 16, 16, generator=torch.Generator().manual_seed(7))
    y = torch.randint(0, 10, (n,), generator=g)
    return TensorDataset(protos[y] + torch.randn(n, 3, 16, 16, generator=g), y)


def main():
    torch.manual_seed(0)
    tnet, snet = WRN(), WRN()
    loader = DataLoader(images(), batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(0))
    optimizer = torch.optim.SGD(snet.parameters(), lr=0.05, momentum=0.9)
    opt = {"beta1": 500, "beta2": 1000, "beta3": 1000}
    criterions = {"criterionCls": nn.CrossEntropyLoss(), "criterionAT": AT(2.0)}
    for epoch in range(2):
        train_step(opt, loader, {"snet": snet, "tnet": tnet}, optimizer, criterions, epoch)


if __name__ == "__main__":
    main()
