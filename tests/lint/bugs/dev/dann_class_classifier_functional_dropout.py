"""
Shape: domain-adversarial training split over modules: models with a gradient-reversal autograd Function, a conv
feature extractor (nn.Dropout2d module), a label classifier and a domain classifier that both end in log_softmax;
a train(mode, extractor, label_head, domain_head, label_crit, domain_crit, src_loader, tgt_loader, optimizer,
epoch) helper that sets the three nets to train(), zips source and target loaders, anneals the reversal constant,
reschedules the SGD learning rate through a utility and steps on label loss plus weighted domain loss; a test(...)
helper that sets the nets to eval() and counts correct predictions; a main script that builds the nets on the GPU,
NLLLoss criteria and one SGD optimizer over all three parameter lists.
Bug: the label classifier applies F.dropout(h) in forward without training=self.training, so dropout stays active
in test() after eval() and the reported source and target accuracies are computed with half the hidden units
dropped.
Thread: https://github.com/CuthbertCai/pytorch_DANN/issues/14
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

from train import params
from util import utils


class ReverseGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, coeff):
        ctx.coeff = coeff
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad.neg() * ctx.coeff, None


class Extractor(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 32, kernel_size=5)
        self.b1 = nn.BatchNorm2d(32)
        self.c2 = nn.Conv2d(32, 48, kernel_size=5)
        self.b2 = nn.BatchNorm2d(48)
        self.drop2d = nn.Dropout2d()

    def forward(self, img):
        img = img.expand(img.size(0), 3, 28, 28)
        h = F.max_pool2d(F.relu(self.b1(self.c1(img))), 2)
        h = F.max_pool2d(F.relu(self.drop2d(self.b2(self.c2(h)))), 2)
        return h.view(-1, 48 * 4 * 4)


class LabelHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(48 * 4 * 4, 100)
        self.l2 = nn.Linear(100, 100)
        self.l3 = nn.Linear(100, 10)

    def forward(self, feat):
        h = F.relu(self.l1(feat))
        h = F.relu(self.l2(F.dropout(h)))
        return F.log_softmax(self.l3(h), 1)


class DomainHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(48 * 4 * 4, 100)
        self.l2 = nn.Linear(100, 2)

    def forward(self, feat, coeff):
        feat = ReverseGrad.apply(feat, coeff)
        return F.log_softmax(self.l2(F.relu(self.l1(feat))), 1)


def train(mode, extractor, label_head, domain_head, label_crit, domain_crit, src_loader, tgt_loader, optimizer, epoch):
    extractor.train()
    label_head.train()
    domain_head.train()
    first = epoch * len(src_loader)
    total = params.epochs * len(src_loader)
    for i, ((xs, ys), (xt, _)) in enumerate(zip(src_loader, tgt_loader)):
        p = float(i + first) / total
        coeff = 2.0 / (1.0 + np.exp(-params.gamma * p)) - 1
        n = min(xs.shape[0], xt.shape[0])
        xs, ys, xt = xs[:n].cuda(), ys[:n].cuda(), xt[:n].cuda()
        optimizer = utils.optimizer_scheduler(optimizer, p)
        optimizer.zero_grad()
        fs, ft = extractor(xs), extractor(xt)
        cls_loss = label_crit(label_head(fs), ys)
        dom_loss = domain_crit(domain_head(fs, coeff), torch.zeros(n, dtype=torch.long).cuda()) + \
            domain_crit(domain_head(ft, coeff), torch.ones(n, dtype=torch.long).cuda())
        loss = cls_loss + params.theta * dom_loss
        loss.backward()
        optimizer.step()


def test(extractor, label_head, domain_head, src_loader, tgt_loader):
    extractor.eval()
    label_head.eval()
    domain_head.eval()
    hits = {"src": 0, "tgt": 0}
    for key, loader in (("src", src_loader), ("tgt", tgt_loader)):
        for x, y in loader:
            pred = label_head(extractor(x.cuda())).argmax(1)
            hits[key] += (pred == y.cuda()).sum().item()
    print(f"source acc {hits['src'] / len(src_loader.dataset):.4f}, target acc {hits['tgt'] / len(tgt_loader.dataset):.4f}")


def main():
    src_tr, src_te = utils.get_train_loader("MNIST"), utils.get_test_loader("MNIST")
    tgt_tr, tgt_te = utils.get_train_loader("MNIST_M"), utils.get_test_loader("MNIST_M")
    extractor, label_head, domain_head = Extractor().cuda(), LabelHead().cuda(), DomainHead().cuda()
    label_crit, domain_crit = nn.NLLLoss(), nn.NLLLoss()
    optimizer = optim.SGD([{"params": extractor.parameters()}, {"params": label_head.parameters()},
                           {"params": domain_head.parameters()}], lr=0.01, momentum=0.9)
    for epoch in range(params.epochs):
        train("dann", extractor, label_head, domain_head, label_crit, domain_crit, src_tr, tgt_tr, optimizer, epoch)
        test(extractor, label_head, domain_head, src_te, tgt_te)


if __name__ == "__main__":
    main()
