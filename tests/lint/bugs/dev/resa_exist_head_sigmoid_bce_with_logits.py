"""
Shape: registry-style lane detector; LanePresenceHead module inside LaneNet returns a dict {'seg', 'exist'}; a separate loss module LaneLossModule(nn.Module) holds self.presence_crit = BCEWithLogitsLoss().cuda() and computes the loss from net(batch['img']); LaneRunner.train_epoch calls self.loss_module.forward(self.net, batch) then zero_grad/backward/step.
Bug: LanePresenceHead.forward ends with torch.sigmoid(x), and output['exist'] is then fed to BCEWithLogitsLoss, applying the sigmoid twice.
Thread: https://github.com/ZJULearning/resa/issues/29
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from models.backbone import ResNetWrapper, RESAModule, BUSDDecoder


class LanePresenceHead(nn.Module):
    def __init__(self, cfg=None):
        super(LanePresenceHead, self).__init__()
        self.cfg = cfg
        self.dropout = nn.Dropout2d(0.1)
        self.reduce = nn.Conv2d(128, cfg.num_classes, 1)
        down = 2 * cfg.backbone.fea_stride
        self.hidden = nn.Linear(int(cfg.num_classes * cfg.img_width / down * cfg.img_height / down), 128)
        self.presence = nn.Linear(128, cfg.num_classes - 1)

    def forward(self, x):
        x = self.dropout(x)
        x = self.reduce(x)
        x = F.softmax(x, dim=1)
        x = F.avg_pool2d(x, kernel_size=2, stride=2)
        x = x.flatten(1)
        x = F.relu(self.hidden(x))
        x = self.presence(x)
        x = torch.sigmoid(x)
        return x


class LaneNet(nn.Module):
    def __init__(self, cfg):
        super(LaneNet, self).__init__()
        self.backbone = ResNetWrapper(cfg=cfg)
        self.resa = RESAModule(cfg)
        self.decoder = BUSDDecoder(cfg)
        self.presence_head = LanePresenceHead(cfg)

    def forward(self, img):
        feat = self.resa(self.backbone(img))
        return {"seg": self.decoder(feat), "exist": self.presence_head(feat)}


class LaneLossModule(nn.Module):
    def __init__(self, cfg):
        super(LaneLossModule, self).__init__()
        self.cfg = cfg
        cls_w = torch.ones(cfg.num_classes)
        cls_w[0] = cfg.bg_weight
        self.seg_crit = torch.nn.NLLLoss(ignore_index=cfg.ignore_label, weight=cls_w.cuda()).cuda()
        self.presence_crit = nn.BCEWithLogitsLoss().cuda()

    def forward(self, net, batch):
        output = net(batch["img"])
        seg_loss = self.seg_crit(F.log_softmax(output["seg"], dim=1), batch["label"].long())
        loss = seg_loss * self.cfg.seg_loss_weight
        loss_log = {"seg_loss": seg_loss}
        if "exist" in output:
            presence_loss = 0.1 * self.presence_crit(output["exist"], batch["exist"].float())
            loss += presence_loss
            loss_log["presence_loss"] = presence_loss
        return {"loss": loss, "loss_stats": loss_log}


class LaneRunner(object):
    def __init__(self, cfg, train_loader):
        self.cfg = cfg
        self.net = torch.nn.parallel.DataParallel(LaneNet(cfg), device_ids=range(cfg.gpus)).cuda()
        params = [{"params": [p], "lr": cfg.lr, "weight_decay": cfg.weight_decay}
                  for _, p in self.net.named_parameters() if p.requires_grad]
        self.optimizer = torch.optim.SGD(params, cfg.lr, weight_decay=cfg.weight_decay, momentum=0.9)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda it: (1 - it / cfg.total_iter) ** 0.9)
        self.loss_module = LaneLossModule(cfg)
        self.train_loader = train_loader

    def train_epoch(self):
        self.net.train()
        for batch in self.train_loader:
            batch = {k: (v if k == "meta" else v.cuda()) for k, v in batch.items()}
            output = self.loss_module.forward(self.net, batch)
            self.optimizer.zero_grad()
            loss = output["loss"]
            loss.backward()
            self.optimizer.step()
            self.scheduler.step()

    def train(self):
        for _ in range(self.cfg.epochs):
            self.train_epoch()
