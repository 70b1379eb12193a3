"""A noisy-label dual-network trainer in the ProMix style: two peer nets share one SGD optimizer
(one parameter group per net); warmup(epoch, net, net2, optimizer, loader) trains both on the noisy
labels, then each epoch eval_train() picks a class-wise small-loss clean set per net and
train(epoch, net, net2, optimizer, loader) adds every sample whose predicted probability on its given
label exceeds tau. Logits are debiased by moving-average class priors, one estimate for the chosen and
one for the unchosen samples. Chosen samples get a soft-label CE; the unchosen ones get a CE against
sharpened pseudo-labels, weighted by beta. Both `CEsoft(out[idx_unchosen], ...).mean()` and the prior
update `px[idx_unchosen].mean(0)` average over idx_unchosen: when every sample of a batch is chosen
it is empty, the mean of an empty tensor is NaN, the loss is NaN, and the NaN prior then poisons the
debiased logits of every later batch, their gradients and the weights.

Thread: https://github.com/Justherozen/ProMix/issues/12
"""
import torch
import torch.nn.functional as F
from torch import nn

NUM_CLASS, DIM, N, BATCH, TAU, T = 10, 32, 1200, 32, 0.99, 0.5


class CE_Soft_Label(nn.Module):
    def forward(self, logits, targets):
        return -(targets * F.log_softmax(logits, dim=1)).sum(dim=1)


def bias_update(probs, pi, m=0.99):
    return pi * m + (1 - m) * probs.mean(0)


def debias_output(logits, pi, alpha=0.8):
    return logits + alpha * torch.log(pi)


def make_net():
    return nn.Sequential(nn.Linear(DIM, 128), nn.ReLU(), nn.Linear(128, NUM_CLASS))


class DualNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1, self.net2 = make_net(), make_net()


def warmup(epoch, net, net2, optimizer, loader):
    net.train(); net2.train()
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(net(x), y) + F.cross_entropy(net2(x), y)
        loss.backward()
        optimizer.step()
    print(f"warmup epoch {epoch} loss {loss.item():.4f}")


def eval_train(model, x, y, rho):
    model.eval()
    with torch.no_grad():
        losses = F.cross_entropy(model(x), y, reduction="none")
    prob = torch.zeros(len(y))
    for c in range(NUM_CLASS):
        idx = torch.where(y == c)[0]
        k = max(int(len(idx) * rho), 1)
        prob[idx[losses[idx].argsort()[:k]]] = 1
    return prob


def train(epoch, net, net2, optimizer, batches, beta, criterion, pis):
    net.train(); net2.train()
    pi1, pi2, pi1_unrel, pi2_unrel = pis
    for x, y, w_x, w_x2 in batches:
        labels_x = F.one_hot(y, NUM_CLASS).float()
        x_s = x + 0.3 * torch.randn_like(x)
        w_x, w_x2 = w_x.view(-1, 1).clone(), w_x2.view(-1, 1).clone()
        raw1, raw1_s, raw2, raw2_s = net(x), net(x_s), net2(x), net2(x_s)
        out1, out1_s = debias_output(raw1, pi1), debias_output(raw1_s, pi1)
        out2, out2_s = debias_output(raw2, pi2), debias_output(raw2_s, pi2)
        out1_u, out2_u = debias_output(raw1_s, pi1_unrel), debias_output(raw2_s, pi2_unrel)
        with torch.no_grad():
            px, px2 = raw1.softmax(1), raw2.softmax(1)
            w_x[(labels_x * px).sum(1) > TAU] = 1
            w_x2[(labels_x * px2).sum(1) > TAU] = 1
            idx_chosen, idx_unchosen = torch.where(w_x == 1)[0], torch.where(w_x != 1)[0]
            idx_chosen_2, idx_unchosen_2 = torch.where(w_x2 == 1)[0], torch.where(w_x2 != 1)[0]
            ptx = px ** (1 / T); ptx = ptx / ptx.sum(1, keepdim=True)
            ptx2 = px2 ** (1 / T); ptx2 = ptx2 / ptx2.sum(1, keepdim=True)
        loss_net1 = criterion(out1[idx_chosen], labels_x[idx_chosen]).mean() \
            + criterion(out1_s[idx_chosen], labels_x[idx_chosen]).mean()
        loss_net2 = criterion(out2[idx_chosen_2], labels_x[idx_chosen_2]).mean() \
            + criterion(out2_s[idx_chosen_2], labels_x[idx_chosen_2]).mean()
        loss_unrel = criterion(out1_u[idx_unchosen], ptx[idx_unchosen]).mean()
        loss_unrel2 = criterion(out2_u[idx_unchosen_2], ptx2[idx_unchosen_2]).mean()
        loss = loss_net1 + loss_net2 + beta * (loss_unrel + loss_unrel2)
        pi1, pi2 = bias_update(px[idx_chosen], pi1), bias_update(px2[idx_chosen_2], pi2)
        pi1_unrel = bias_update(px[idx_unchosen], pi1_unrel)
        pi2_unrel = bias_update(px2[idx_unchosen_2], pi2_unrel)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f} net1 loss {loss_net1.item():.4f}")
    return pi1, pi2, pi1_unrel, pi2_unrel


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    centers = 3 * torch.randn(NUM_CLASS, DIM, generator=g)
    y_true = torch.randint(0, NUM_CLASS, (N,), generator=g)
    x = centers[y_true] + torch.randn(N, DIM, generator=g)
    y = y_true.clone()
    flip = torch.rand(N, generator=g) < 0.1
    y[flip] = torch.randint(0, NUM_CLASS, (int(flip.sum()),), generator=g)
    dual = DualNet()
    optimizer = torch.optim.SGD([{"params": dual.net1.parameters()}, {"params": dual.net2.parameters()}],
                                lr=0.05, momentum=0.9, weight_decay=5e-4)
    criterion = CE_Soft_Label()
    pis = tuple(torch.full((NUM_CLASS,), 1.0 / NUM_CLASS) for _ in range(4))
    for epoch in range(5):
        perm = torch.randperm(N, generator=g)
        if epoch < 1:
            warmup(epoch, dual.net1, dual.net2, optimizer,
                   [(x[i], y[i]) for i in perm.split(BATCH)])
            continue
        rho = 0.2 + 0.1 * epoch
        prob1, prob2 = eval_train(dual.net1, x, y, rho), eval_train(dual.net2, x, y, rho)
        batches = [(x[i], y[i], prob1[i], prob2[i]) for i in perm.split(BATCH)]
        beta = 0.1 * min(epoch / 4, 1.0)
        pis = train(epoch, dual.net1, dual.net2, optimizer, batches, beta, criterion, pis)
        dual.net1.eval()
        with torch.no_grad():
            acc = (dual.net1(x).argmax(1) == y_true).float().mean().item()
        print(f"epoch {epoch} clean accuracy net1 {acc:.3f}")


if __name__ == "__main__":
    main()
