"""A one-shot tracker trained as a multi-task model: a small conv backbone with a centre heatmap head,
a box-size head and a re-identification embedding head. A MotLoss module weighs the detection and
identity losses with learnable uncertainty terms (s_det, s_id, Kendall-style) and also owns the
identity classifier (a Linear from the embedding to the identity count). A ModelWithLoss wrapper and a
BaseTrainer.run_epoch() drive training, with Adam built in main() from model.parameters(). The
optimizer never receives the loss module's parameters, so s_det, s_id and the identity classifier
keep their initial values for the whole run: the uncertainty weighting is a constant and the
identity classifier stays at its random initialisation, with only the embedding head bending
towards it.

Thread: https://github.com/ifzhang/FairMOT/issues/19
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

N_IDS, EMB, RES = 24, 16, 16


class TrackNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
                                      nn.Conv2d(16, 32, 3, padding=1), nn.ReLU())
        self.hm = nn.Conv2d(32, 1, 1)
        self.wh = nn.Conv2d(32, 2, 1)
        self.id = nn.Conv2d(32, EMB, 1)

    def forward(self, x):
        f = self.backbone(x)
        return {"hm": self.hm(f), "wh": self.wh(f), "id": self.id(f)}


def gather_at(feat, ind):
    b, c = feat.shape[:2]
    flat = feat.view(b, c, -1)
    return flat.gather(2, ind.view(b, 1, 1).expand(b, c, 1)).squeeze(2)


class MotLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.classifier = nn.Linear(EMB, N_IDS)
        self.emb_scale = math.sqrt(2) * math.log(N_IDS - 1)
        self.s_det = nn.Parameter(-1.85 * torch.ones(1))
        self.s_id = nn.Parameter(-1.05 * torch.ones(1))

    def forward(self, out, batch):
        hm_loss = F.mse_loss(torch.sigmoid(out["hm"]), batch["hm"])
        wh_loss = F.l1_loss(gather_at(out["wh"], batch["ind"]), batch["wh"])
        det_loss = hm_loss + 0.1 * wh_loss
        emb = self.emb_scale * F.normalize(gather_at(out["id"], batch["ind"]), dim=1)
        logits = self.classifier(emb)
        id_loss = F.cross_entropy(logits, batch["ids"])
        loss = 0.5 * (torch.exp(-self.s_det) * det_loss + torch.exp(-self.s_id) * id_loss
                      + self.s_det + self.s_id)
        acc = (logits.argmax(1) == batch["ids"]).float().mean()
        return loss, {"loss": loss.item(), "hm": hm_loss.item(), "id": id_loss.item(), "id_acc": acc.item()}


class ModelWithLoss(nn.Module):
    def __init__(self, model, loss):
        super().__init__()
        self.model, self.loss = model, loss

    def forward(self, batch):
        out = self.model(batch["input"])
        loss, stats = self.loss(out, batch)
        return out, loss, stats


class BaseTrainer:
    def __init__(self, model, optimizer):
        self.optimizer = optimizer
        self.loss = MotLoss()
        self.model_with_loss = ModelWithLoss(model, self.loss)

    def run_epoch(self, phase, epoch, loader):
        self.model_with_loss.train()
        for it, batch in enumerate(loader):
            _, loss, stats = self.model_with_loss(batch)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            if it % 10 == 0:
                print(f"{phase} ep {epoch} it {it} " + " ".join(f"{k} {v:.4f}" for k, v in stats.items()))


def make_loader(n_batches, bs, g):
    # each identity has its own fixed texture; an object is that texture pasted at a random place
    textures = torch.rand(N_IDS, 4, 4, generator=g) * 2 - 0.5
    yy, xx = torch.meshgrid(torch.arange(RES), torch.arange(RES), indexing="ij")
    batches = []
    for _ in range(n_batches):
        ids = torch.randint(0, N_IDS, (bs,), generator=g)
        cy = torch.randint(2, RES - 2, (bs,), generator=g)
        cx = torch.randint(2, RES - 2, (bs,), generator=g)
        img = 0.1 * torch.randn(bs, 1, RES, RES, generator=g)
        hm = torch.zeros(bs, 1, RES, RES)
        for i in range(bs):
            img[i, 0, cy[i] - 2:cy[i] + 2, cx[i] - 2:cx[i] + 2] += textures[ids[i]]
            hm[i, 0] = torch.exp(-((yy - cy[i]) ** 2 + (xx - cx[i]) ** 2).float() / 2.0)
        wh = torch.full((bs, 2), 4.0) + 0.5 * torch.randn(bs, 2, generator=g)
        batches.append({"input": img, "hm": hm, "wh": wh, "ind": cy * RES + cx, "ids": ids})
    return batches


def main():
    torch.manual_seed(0)
    loader = make_loader(20, 16, torch.Generator().manual_seed(0))
    model = TrackNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    trainer = BaseTrainer(model, optimizer)
    for epoch in range(1, 5):
        trainer.run_epoch("train", epoch, loader)
    print(f"s_det {trainer.loss.s_det.item():.3f}  s_id {trainer.loss.s_id.item():.3f}")


if __name__ == "__main__":
    main()
