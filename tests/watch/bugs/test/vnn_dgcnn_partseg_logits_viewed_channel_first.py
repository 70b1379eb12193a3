"""A point-cloud part-segmentation training script: a DGCNN-style get_model (k-nearest-neighbour
edge features, Conv2d + max over neighbours, a global max-pooled feature concatenated with an
embedded object-category one-hot, Conv1d head) and a get_loss module with label-smoothed cross
entropy; the script-level epoch loop sets the lr and the BatchNorm momentum by hand, then for each
batch transposes the points to (B, 3, N), calls classifier.train(), flattens the prediction with
seg_pred.contiguous().view(-1, num_part) and steps SGD. The DGCNN head returns its logits as
(B, num_part, N), channel first, while the flattening was written for the (B, N, num_part) layout of
the PointNet model, so view() deals out the values of each part channel, point after point, into
rows that are matched to the wrong points: the loss and the accuracy are computed against scrambled
per-point predictions, with no error.

Thread: https://github.com/FlyingGiraffe/vnn/issues/8
"""
import types

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def knn(x, k):
    inner = -2 * torch.matmul(x.transpose(2, 1), x)
    xx = torch.sum(x ** 2, dim=1, keepdim=True)
    return (-xx - inner - xx.transpose(2, 1)).topk(k=k, dim=-1)[1]


def get_graph_feature(x, k):
    b, c, n = x.shape
    idx = (knn(x, k) + torch.arange(b).view(-1, 1, 1) * n).view(-1)
    pts = x.transpose(2, 1).contiguous()
    neigh = pts.view(b * n, -1)[idx].view(b, n, k, c)
    centre = pts.view(b, n, 1, c).expand(-1, -1, k, -1)
    return torch.cat((neigh - centre, centre), dim=3).permute(0, 3, 1, 2).contiguous()


class get_model(nn.Module):
    def __init__(self, args, num_part, num_classes):
        super().__init__()
        self.k = args.n_knn
        self.conv1 = nn.Sequential(nn.Conv2d(6, 32, 1, bias=False), nn.BatchNorm2d(32), nn.LeakyReLU(0.2))
        self.conv2 = nn.Sequential(nn.Conv2d(64, 32, 1, bias=False), nn.BatchNorm2d(32), nn.LeakyReLU(0.2))
        self.conv3 = nn.Sequential(nn.Conv1d(64, 128, 1, bias=False), nn.BatchNorm1d(128), nn.LeakyReLU(0.2))
        self.conv_cat = nn.Sequential(nn.Conv1d(num_classes, 16, 1, bias=False), nn.BatchNorm1d(16), nn.LeakyReLU(0.2))
        self.conv4 = nn.Sequential(nn.Conv1d(128 + 16 + 64, 64, 1, bias=False), nn.BatchNorm1d(64), nn.LeakyReLU(0.2))
        self.dp = nn.Dropout(p=0.3)
        self.conv5 = nn.Conv1d(64, num_part, 1, bias=False)

    def forward(self, x, l):
        b, _, n = x.shape
        x1 = self.conv1(get_graph_feature(x, self.k)).max(dim=-1)[0]
        x2 = self.conv2(get_graph_feature(x1, self.k)).max(dim=-1)[0]
        glob = self.conv3(torch.cat((x1, x2), dim=1)).max(dim=-1, keepdim=True)[0]
        cat = self.conv_cat(l.view(b, -1, 1))
        feat = torch.cat((glob, cat), dim=1).repeat(1, 1, n)
        x = self.conv4(torch.cat((feat, x1, x2), dim=1))
        x = self.conv5(self.dp(x))
        return x, None


class get_loss(nn.Module):
    def forward(self, pred, target, trans_feat, smoothing=True):
        target = target.contiguous().view(-1)
        eps = 0.2
        n_class = pred.size(1)
        one_hot = torch.zeros_like(pred).scatter(1, target.view(-1, 1), 1)
        one_hot = one_hot * (1 - eps) + (1 - one_hot) * eps / (n_class - 1)
        return -(one_hot * F.log_softmax(pred, dim=1)).sum(dim=1).mean()


def to_categorical(y, num_classes):
    return torch.eye(num_classes)[y.view(-1)]


def part_dataset(n, seed, npoint=64):
    """Two object categories, two parts each: the part is the side of the object along one axis."""
    g = torch.Generator().manual_seed(seed)
    label = torch.randint(0, 2, (n, 1), generator=g)
    pts = torch.randn(n, npoint, 3, generator=g) * torch.tensor([1.0, 0.6, 0.4])
    axis = torch.where(label == 0, 0, 2)
    coord = torch.gather(pts, 2, axis.view(n, 1, 1).expand(n, npoint, 1)).squeeze(-1)
    target = (coord > 0).long() + 2 * label
    return pts, label, target


def batches(data, batch_size, gen=None):
    pts, label, target = data
    order = torch.randperm(len(pts), generator=gen) if gen is not None else torch.arange(len(pts))
    for i in range(0, len(pts), batch_size):
        idx = order[i:i + batch_size]
        yield pts[idx], label[idx], target[idx]


def main():
    args = types.SimpleNamespace(batch_size=8, npoint=64, epoch=7, learning_rate=0.001, lr_decay=0.5,
                                 step_size=20, decay_rate=1e-4, n_knn=8)
    torch.manual_seed(0)
    num_classes, num_part = 2, 4
    train_data = part_dataset(80, seed=1, npoint=args.npoint)
    test_data = part_dataset(32, seed=2, npoint=args.npoint)
    shuffle_gen = torch.Generator().manual_seed(3)

    classifier = get_model(args, num_part, num_classes)
    criterion = get_loss()
    optimizer = torch.optim.SGD(classifier.parameters(), lr=args.learning_rate * 100, momentum=0.9,
                                weight_decay=args.decay_rate)

    def bn_momentum_adjust(m, momentum):
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            m.momentum = momentum

    for epoch in range(args.epoch):
        lr = max(args.learning_rate * 100 * (args.lr_decay ** (epoch // args.step_size)), 1e-5)
        for param_group in optimizer.param_groups:
            param_group['lr'] = lr
        momentum = max(0.1 * (0.5 ** (epoch // args.step_size)), 0.01)
        classifier = classifier.apply(lambda m: bn_momentum_adjust(m, momentum))
        mean_correct = []
        for points, label, target in batches(train_data, args.batch_size, shuffle_gen):
            points = points.transpose(2, 1)
            optimizer.zero_grad()
            classifier = classifier.train()
            seg_pred, trans_feat = classifier(points, to_categorical(label, num_classes))
            seg_pred = seg_pred.contiguous().view(-1, num_part)
            target = target.view(-1, 1)[:, 0]
            pred_choice = seg_pred.data.max(1)[1]
            mean_correct.append(pred_choice.eq(target).float().mean().item())
            loss = criterion(seg_pred, target, trans_feat)
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            classifier = classifier.eval()
            correct = seen = 0
            for points, label, target in batches(test_data, args.batch_size):
                seg_pred, _ = classifier(points.transpose(2, 1), to_categorical(label, num_classes))
                pred = seg_pred.contiguous().view(-1, num_part).max(1)[1]
                correct += pred.eq(target.view(-1)).sum().item()
                seen += target.numel()
        print(f'epoch {epoch + 1}: lr {lr:.3f} train acc {np.mean(mean_correct):.4f} '
              f'test acc {correct / seen:.4f} loss {loss.item():.4f}')


if __name__ == '__main__':
    main()
