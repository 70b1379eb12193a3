"""
Shape: one `pretrain(args)` function builds a DGCNN encoder + Conv1d/BatchNorm/Dropout segmentation
head (`PointSegNet`), an Adam with two param groups and a StepLR, then runs `for epoch in
range(args.n_iters)` over the train loader; every `eval_interval` epochs it validates under
`torch.no_grad()`, calling `model.eval()` inside the validation batch loop.
Bug: nothing puts the network back into train mode, so after the first validation every later
epoch trains with BatchNorm using running statistics and Dropout switched off; the author added
`model.train()` at the start of each epoch.
Thread: https://github.com/Na-Z/attMPTI/issues/16
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim
from torch.utils.data import DataLoader
from torch.utils.tensorboard import SummaryWriter

from dataloaders.loader import MyPretrainDataset
from models.dgcnn import DGCNN
from utils.checkpoint_util import save_pretrain_checkpoint


class PointSegNet(nn.Module):
    def __init__(self, args, n_cls):
        super().__init__()
        self.encoder = DGCNN(args.edgeconv_widths, args.dgcnn_mlp_widths, args.pc_in_dim,
                             k=args.dgcnn_k, return_edgeconvs=True)
        feat_dim = args.dgcnn_mlp_widths[-1] + sum(w[-1] for w in args.edgeconv_widths)
        self.segmenter = torch.nn.Sequential(
            nn.Conv1d(feat_dim, 256, 1, bias=False), nn.BatchNorm1d(256), nn.LeakyReLU(0.2),
            nn.Conv1d(256, 128, 1), nn.BatchNorm1d(128), nn.LeakyReLU(0.2),
            nn.Dropout(p=0.3),
            nn.Conv1d(128, n_cls, 1),
        )

    def forward(self, pts):
        n_pts = pts.shape[2]
        layer_feats, point_feat = self.encoder(pts)
        pooled = point_feat.max(dim=-1, keepdim=True)[0]
        layer_feats.append(pooled.expand(-1, -1, n_pts))
        return self.segmenter(torch.cat(layer_feats, dim=1))


def pretrain(args, dataset):
    classes = dataset.train_classes
    n_cls = len(classes) + 1
    scans = {c: dataset.class2scans[c] for c in classes}
    train_set = MyPretrainDataset(args.data_path, classes, scans, mode="train", num_point=args.pc_npts)
    val_set = MyPretrainDataset(args.data_path, classes, scans, mode="test", num_point=args.pc_npts)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, num_workers=args.n_workers,
                              shuffle=True, drop_last=True)
    val_loader = DataLoader(val_set, batch_size=args.batch_size, num_workers=args.n_workers,
                            shuffle=False, drop_last=True)
    tb = SummaryWriter(log_dir=args.log_dir)

    model = PointSegNet(args, n_cls=n_cls)
    if torch.cuda.is_available():
        model.cuda()

    adam = optim.Adam(
        [{"params": model.encoder.parameters(), "lr": args.pretrain_lr},
         {"params": model.segmenter.parameters(), "lr": args.pretrain_lr}],
        weight_decay=args.pretrain_weight_decay,
    )
    step_sched = optim.lr_scheduler.StepLR(adam, step_size=args.pretrain_step_size, gamma=args.pretrain_gamma)

    best_miou = 0.0
    it = 0
    for epoch in range(0, args.n_iters):
        for pts, lbl in train_loader:
            if torch.cuda.is_available():
                pts, lbl = pts.cuda(), lbl.cuda()
            out = model(pts)
            loss = F.cross_entropy(out, lbl)
            adam.zero_grad()
            loss.backward()
            adam.step()
            tb.add_scalar("Train/loss", loss, it)
            it += 1

        step_sched.step()

        if (epoch + 1) % args.eval_interval == 0:
            hits, total = 0, 0
            with torch.no_grad():
                for pts, lbl in val_loader:
                    if torch.cuda.is_available():
                        pts, lbl = pts.cuda(), lbl.cuda()
                    model.eval()
                    out = model(pts)
                    val_loss = F.cross_entropy(out, lbl)
                    hits += (out.argmax(dim=1) == lbl).sum().item()
                    total += lbl.numel()
                    tb.add_scalar("Valid/loss", val_loss, it)
            acc = hits / max(total, 1)
            if acc > best_miou:
                best_miou = acc
                save_pretrain_checkpoint(model, log_dir=args.log_dir)

    tb.close()
