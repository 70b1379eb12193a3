"""A fine-grained classifier in the style of NTS-Net (navigator-teacher-scrutinizer): a ResNet
backbone whose forward returns (logits, feature map, pooled feature), a ProposalNet that scores
fixed anchor boxes on the feature map, an attention_net that crops the top-N boxes, resizes them,
runs them through the same backbone and classifies the concatenated features; list_loss and
ranking_loss helpers; four SGD optimizers (backbone, proposal, concat, part classifier) with
MultiStepLR each, zero_grad x4 / one backward of the summed loss / step x4 per batch, and an
evaluation every SAVE_FREQ epochs under net.eval() and no_grad on the training and test loaders.
The backbone's forward applies dropout as nn.Dropout(p=0.5)(x), a module created on the fly
inside forward; it is always in training mode, so net.eval() does not switch it off and the pooled
features are randomly dropped during evaluation as well: the same checkpoint gives different test
predictions each run.

Thread: https://github.com/yangze0930/NTS-Net/issues/14
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.lr_scheduler import MultiStepLR
from torch.utils.data import DataLoader, Dataset

NUM_CLASS = 8
PROPOSAL_NUM = 3
CAT_NUM = 2
IMG = 32
BATCH_SIZE = 16
SAVE_FREQ = 2


class FineGrained(Dataset):
    """Classes differ only by a small coloured part placed somewhere in a cluttered image."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        pg = torch.Generator().manual_seed(11)
        parts = torch.rand(NUM_CLASS, 3, 6, 6, generator=pg)
        self.labels = torch.randint(0, NUM_CLASS, (n,), generator=g)
        self.imgs = 0.5 * torch.rand(n, 3, IMG, IMG, generator=g)
        pos = torch.randint(4, IMG - 10, (n, 2), generator=g)
        for k in range(n):
            y, x = pos[k].tolist()
            self.imgs[k, :, y:y + 6, x:x + 6] = parts[self.labels[k]]
        self.imgs = (self.imgs - 0.4) / 0.3

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.imgs[i], self.labels[i]


class Bottleneck(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                                  nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
        self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        return F.relu(self.body(x) + self.short(x))


class ResNet(nn.Module):
    def __init__(self, num_classes=NUM_CLASS):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.layer1 = Bottleneck(8, 16, 2)
        self.layer2 = Bottleneck(16, 32, 2)
        self.layer3 = Bottleneck(32, 32, 2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        x = self.layer3(self.layer2(self.layer1(self.stem(x))))
        feature1 = x
        x = self.avgpool(x).view(x.size(0), -1)
        x = nn.Dropout(p=0.5)(x)
        feature2 = x
        x = self.fc(x)
        return x, feature1, feature2


def make_anchors(fmap=4, stride=8, sizes=(12, 20)):
    boxes = []
    for size in sizes:
        for i in range(fmap):
            for j in range(fmap):
                cy, cx = stride * i + stride // 2, stride * j + stride // 2
                boxes.append([cy - size // 2, cx - size // 2, cy + size // 2, cx + size // 2])
    return np.array(boxes)


class ProposalNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.down = nn.Conv2d(32, 32, 3, 1, 1)
        self.tidy = nn.Conv2d(32, 2, 1)

    def forward(self, x):
        return self.tidy(F.relu(self.down(x))).view(x.size(0), -1)


class attention_net(nn.Module):
    def __init__(self, topN=PROPOSAL_NUM):
        super().__init__()
        self.pretrained_model = ResNet()
        self.proposal_net = ProposalNet()
        self.topN = topN
        self.concat_net = nn.Linear(32 * (CAT_NUM + 1), NUM_CLASS)
        self.partcls_net = nn.Linear(32, NUM_CLASS)
        self.pad_side = 12
        self.edge_anchors = make_anchors() + self.pad_side

    def forward(self, x):
        resnet_out, rpn_feature, feature = self.pretrained_model(x)
        x_pad = F.pad(x, [self.pad_side] * 4)
        batch = x.size(0)
        rpn_score = self.proposal_net(rpn_feature.detach())
        top_n_index = torch.topk(rpn_score.detach(), self.topN, dim=1).indices
        top_n_prob = torch.gather(rpn_score, dim=1, index=top_n_index)
        part_imgs = torch.zeros(batch, self.topN, 3, IMG, IMG)
        for i in range(batch):
            for j in range(self.topN):
                y0, x0, y1, x1 = self.edge_anchors[top_n_index[i, j].item()].tolist()
                part_imgs[i:i + 1, j] = F.interpolate(x_pad[i:i + 1, :, y0:y1, x0:x1], size=(IMG, IMG),
                                                      mode='bilinear', align_corners=True)
        part_imgs = part_imgs.view(batch * self.topN, 3, IMG, IMG)
        _, _, part_features = self.pretrained_model(part_imgs.detach())
        part_feature = part_features.view(batch, self.topN, -1)[:, :CAT_NUM].contiguous().view(batch, -1)
        concat_logits = self.concat_net(torch.cat([part_feature, feature], dim=1))
        part_logits = self.partcls_net(part_features).view(batch, self.topN, -1)
        return [resnet_out, concat_logits, part_logits, top_n_index, top_n_prob]


def list_loss(logits, targets):
    temp = F.log_softmax(logits, -1)
    return torch.stack([-temp[i][targets[i].item()] for i in range(logits.size(0))])


def ranking_loss(score, targets, proposal_num=PROPOSAL_NUM):
    loss = torch.zeros(1)
    for i in range(proposal_num):
        targets_p = (targets > targets[:, i].unsqueeze(1)).float()
        pivot = score[:, i].unsqueeze(1)
        loss = loss + torch.sum(F.relu((1 - pivot + score) * targets_p))
    return loss / score.size(0)


def main():
    torch.manual_seed(0)
    trainloader = DataLoader(FineGrained(256, 1), batch_size=BATCH_SIZE, shuffle=True,
                             generator=torch.Generator().manual_seed(2))
    testloader = DataLoader(FineGrained(96, 3), batch_size=BATCH_SIZE, shuffle=False)
    net = attention_net(topN=PROPOSAL_NUM)
    creterion = nn.CrossEntropyLoss()
    LR, WD = 0.01, 1e-4
    raw_optimizer = torch.optim.SGD(net.pretrained_model.parameters(), lr=LR, momentum=0.9, weight_decay=WD)
    concat_optimizer = torch.optim.SGD(net.concat_net.parameters(), lr=LR, momentum=0.9, weight_decay=WD)
    part_optimizer = torch.optim.SGD(net.proposal_net.parameters(), lr=LR, momentum=0.9, weight_decay=WD)
    partcls_optimizer = torch.optim.SGD(net.partcls_net.parameters(), lr=LR, momentum=0.9, weight_decay=WD)
    optimizers = [raw_optimizer, concat_optimizer, part_optimizer, partcls_optimizer]
    schedulers = [MultiStepLR(o, milestones=[60, 100], gamma=0.1) for o in optimizers]

    for epoch in range(1, 5):
        net.train()
        for i, (img, label) in enumerate(trainloader):
            batch_size = img.size(0)
            for o in optimizers:
                o.zero_grad()
            raw_logits, concat_logits, part_logits, _, top_n_prob = net(img)
            flat_labels = label.unsqueeze(1).repeat(1, PROPOSAL_NUM).view(-1)
            part_loss = list_loss(part_logits.view(batch_size * PROPOSAL_NUM, -1),
                                  flat_labels).view(batch_size, PROPOSAL_NUM)
            raw_loss = creterion(raw_logits, label)
            concat_loss = creterion(concat_logits, label)
            rank_loss = ranking_loss(top_n_prob, part_loss)
            partcls_loss = creterion(part_logits.view(batch_size * PROPOSAL_NUM, -1), flat_labels)
            total_loss = raw_loss + rank_loss + concat_loss + partcls_loss
            total_loss.backward()
            for o in optimizers:
                o.step()
        for s in schedulers:
            s.step()

        if epoch % SAVE_FREQ != 0:
            continue
        net.eval()
        for name, loader in (("train", trainloader), ("test", testloader)):
            correct, total, loss_sum = 0, 0, 0.0
            with torch.no_grad():
                for img, label in loader:
                    _, concat_logits, _, _, _ = net(img)
                    loss_sum += creterion(concat_logits, label).item() * img.size(0)
                    correct += (concat_logits.argmax(1) == label).sum().item()
                    total += img.size(0)
            print('epoch:{} - {} loss: {:.3f} and {} acc: {:.3f}'.format(epoch, name, loss_sum / total, name,
                                                                          correct / total))
    print('finishing training')


if __name__ == '__main__':
    main()
