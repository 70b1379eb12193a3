"""
Shape: custom BinaryFocalLoss(nn.Module) wraps F.binary_cross_entropy_with_logits; the two-branch model's forward returns (score, map); main() builds model.cuda(), SGD, SmoothL1 + focal criteria, GradScaler, and trains under autocast with model.zero_grad() per batch.
Bug: the classification branch ends with torch.sigmoid(x) and that score is passed to BinaryFocalLoss, whose binary_cross_entropy_with_logits applies a second sigmoid.
Thread: https://github.com/meilfang/LMFD-PAD/pull/1
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.cuda.amp import GradScaler, autocast
from tqdm import tqdm

from dataset import FacePAD_Train
from model.backbones import DualEncoder


class BinaryFocalLoss(nn.Module):
    def __init__(self, alpha=0.25, gamma=2):
        super(BinaryFocalLoss, self).__init__()
        self.alpha = torch.tensor([alpha, 1.0 - alpha]).cuda()
        self.gamma = gamma

    def forward(self, scores, gts):
        bce_el = F.binary_cross_entropy_with_logits(scores, gts, reduction="none")
        gts = gts.type(torch.long)
        alpha_t = self.alpha.gather(0, gts.data.view(-1))
        p_t = torch.exp(-bce_el)
        return (alpha_t * (1 - p_t) ** self.gamma * bce_el).mean()


class DualStreamPAD(nn.Module):
    def __init__(self, pretrain=True, variant="resnet50"):
        super(DualStreamPAD, self).__init__()
        self.encoder = DualEncoder(pretrain=pretrain, variant=variant)
        self.map_head = nn.Sequential(
            nn.Conv2d(2048, 256, kernel_size=3, stride=1, padding=1, bias=False),
            nn.BatchNorm2d(256),
            nn.ReLU(),
            nn.Conv2d(256, 1, kernel_size=3, stride=1, padding=1, bias=False),
            nn.Sigmoid(),
        )
        self.fc_fuse = nn.Linear(4096, 1024, bias=False)
        self.fc_bn = nn.BatchNorm1d(1024)
        self.fc_drop = nn.Dropout(p=0.6)
        self.fc_out = nn.Linear(1024, 1, bias=False)

    def forward(self, x):
        pooled, fmap = self.encoder(x)
        map_gt = self.map_head(fmap).squeeze(1)
        x = self.fc_fuse(pooled)
        x = self.fc_bn(x)
        x = self.fc_drop(x)
        x = self.fc_out(x)
        x = torch.sigmoid(x)
        return x, map_gt


def main(args):
    model = DualStreamPAD(pretrain=args.pretrain, variant=args.backbone).cuda()
    train_loader = torch.utils.data.DataLoader(FacePAD_Train(args.train_csv), batch_size=args.batch_size,
                                               shuffle=True, num_workers=args.num_works, pin_memory=True)

    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, weight_decay=1e-4, momentum=0.9, nesterov=True)
    map_crit = nn.SmoothL1Loss().cuda()
    focal_crit = BinaryFocalLoss(alpha=0.5, gamma=2).cuda()
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, 0.999)
    scaler = GradScaler()

    for epoch in range(args.epochs):
        model.train()
        map_w = 100 if epoch >= 4 else 1
        for images, labels, map_gt in tqdm(train_loader):
            images = images.cuda()
            labels = labels.cuda()
            map_gt = map_gt.cuda()
            model.zero_grad()

            with autocast():
                score, map_pred = model(images)
                score = torch.squeeze(score)
                cls_loss = focal_crit(score.type(torch.cuda.FloatTensor), labels.type(torch.cuda.FloatTensor))
                map_loss = map_crit(map_pred, map_gt) * map_w
                loss = cls_loss + map_loss

            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        scheduler.step()
