"""Hierarchical image classification with two heads (coarse superclass and fine subclass) on a shared
CNN trunk. A HierarchicalLossNetwork class holds the class hierarchy and computes two terms: a
layer loss (cross-entropy at each level, weighted by alpha) and a dependency loss (weighted by
beta) meant to penalise predictions whose fine class does not belong to the predicted coarse
class. The training loop sums the two terms, calls backward and steps Adam; it logs both terms.

Bug: the dependency loss is built from argmax'ed predictions, a fresh FloatTensor from the
hierarchy lookup and torch.where on integer comparisons. None of these carry an autograd history,
so the term is a constant with respect to the network: it is added to the total and printed as if
it were being minimised, but its gradient is zero and it has no effect on training whatever beta
is. The hierarchy-consistency objective never trains anything.

Thread: https://github.com/Ugenteraan/Deep_Hierarchical_Classification/issues/6
"""
import torch
import torch.nn.functional as F
from torch import nn

N_SUPER = 4
SUB_PER_SUPER = 3
N_SUB = N_SUPER * SUB_PER_SUPER


class HierarchicalLossNetwork:
    def __init__(self, hierarchy, total_level=2, alpha=1.0, beta=0.8, p_loss=3.0):
        self.hierarchy = hierarchy  # superclass index -> list of subclass indices
        self.total_level = total_level
        self.alpha = alpha
        self.beta = beta
        self.p_loss = p_loss

    def check_hierarchy(self, current_level, previous_level):
        bool_tensor = [int(current_level[i].item() not in self.hierarchy[previous_level[i].item()])
                       for i in range(previous_level.size(0))]
        return torch.FloatTensor(bool_tensor)

    def calculate_lloss(self, predictions, true_labels):
        lloss = 0
        for level in range(self.total_level):
            lloss = lloss + F.cross_entropy(predictions[level], true_labels[level])
        return self.alpha * lloss

    def calculate_dloss(self, predictions, true_labels):
        dloss = 0
        for level in range(1, self.total_level):
            current_pred = torch.argmax(F.softmax(predictions[level], dim=1), dim=1)
            prev_pred = torch.argmax(F.softmax(predictions[level - 1], dim=1), dim=1)
            d_l = self.check_hierarchy(current_pred, prev_pred)
            l_prev = torch.where(prev_pred == true_labels[level - 1], 0.0, 1.0)
            l_curr = torch.where(current_pred == true_labels[level], 0.0, 1.0)
            dloss = dloss + torch.sum(torch.pow(self.p_loss, d_l * l_prev)
                                      * torch.pow(self.p_loss, d_l * l_curr) - 1)
        return self.beta * dloss


class HierarchicalCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.AdaptiveAvgPool2d(2), nn.Flatten())
        self.super_head = nn.Linear(128, N_SUPER)
        self.sub_head = nn.Linear(128, N_SUB)

    def forward(self, x):
        f = self.trunk(x)
        return self.super_head(f), self.sub_head(f)


def make_data(n, g, prototypes):
    sub = torch.randint(0, N_SUB, (n,), generator=g)
    sup = sub // SUB_PER_SUPER
    x = prototypes[sub] + 2.5 * torch.randn(n, 3, 12, 12, generator=g)
    return x, sup, sub


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    coarse = torch.randn(N_SUPER, 3, 12, 12, generator=g)
    prototypes = torch.stack([coarse[s // SUB_PER_SUPER] + 0.6 * torch.randn(3, 12, 12, generator=g)
                              for s in range(N_SUB)])
    x, y_super, y_sub = make_data(2048, g, prototypes)
    hierarchy = {s: list(range(s * SUB_PER_SUPER, (s + 1) * SUB_PER_SUPER)) for s in range(N_SUPER)}
    model = HierarchicalCNN()
    hloss = HierarchicalLossNetwork(hierarchy, total_level=2, alpha=1.0, beta=0.8)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    step = 0
    for epoch in range(3):
        model.train()
        perm = torch.randperm(len(x), generator=g)
        for i in range(0, len(perm), 64):
            idx = perm[i:i + 64]
            optimizer.zero_grad()
            preds = model(x[idx])
            labels = [y_super[idx], y_sub[idx]]
            dloss = hloss.calculate_dloss(preds, labels)
            lloss = hloss.calculate_lloss(preds, labels)
            total_loss = lloss + dloss
            total_loss.backward()
            optimizer.step()
            if step % 20 == 0:
                print(f"epoch {epoch} step {step} lloss {lloss.item():.4f} "
                      f"dloss {float(dloss):.4f} total {total_loss.item():.4f}")
            step += 1
    model.eval()
    with torch.no_grad():
        xs, ys_sup, ys_sub = make_data(512, g, prototypes)
        p_sup, p_sub = model(xs)
        consistent = (p_sub.argmax(1) // SUB_PER_SUPER == p_sup.argmax(1)).float().mean().item()
        print(f"super acc {(p_sup.argmax(1) == ys_sup).float().mean().item():.3f} "
              f"sub acc {(p_sub.argmax(1) == ys_sub).float().mean().item():.3f} "
              f"hierarchy-consistent predictions {consistent:.3f}")


if __name__ == "__main__":
    main()
