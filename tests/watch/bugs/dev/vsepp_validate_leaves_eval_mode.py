"""A VSE image-text embedding model class with train_start()/val_start() methods and a train() loop
that calls validate() every val_step iterations; validate() calls model.val_start() (eval mode) and
nothing calls model.train_start() until the next epoch, so dropout and BatchNorm train in eval mode
for most of every epoch.

Thread: https://github.com/fartashf/vsepp/issues/4
"""
import torch
import torch.nn.functional as F
from torch import nn


class EncoderImage(nn.Module):
    def __init__(self, img_dim=64, embed_size=32):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(img_dim, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Dropout(0.3),
                                nn.Linear(64, embed_size))

    def forward(self, images):
        return F.normalize(self.fc(images), dim=1)


class EncoderText(nn.Module):
    def __init__(self, vocab=100, embed_size=32):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab, 64)
        self.fc = nn.Sequential(nn.Dropout(0.3), nn.Linear(64, embed_size))

    def forward(self, captions):
        return F.normalize(self.fc(self.embed(captions)), dim=1)


class ContrastiveLoss(nn.Module):
    def __init__(self, margin=0.2):
        super().__init__()
        self.margin = margin

    def forward(self, im, s):
        scores = im @ s.t()
        diagonal = scores.diag().view(-1, 1)
        cost_s = (self.margin + scores - diagonal).clamp(min=0)
        cost_im = (self.margin + scores - diagonal.t()).clamp(min=0)
        mask = torch.eye(scores.size(0), dtype=torch.bool)
        return cost_s.masked_fill(mask, 0).sum() + cost_im.masked_fill(mask, 0).sum()


class VSE:
    def __init__(self, lr=2e-3):
        self.img_enc, self.txt_enc = EncoderImage(), EncoderText()
        self.criterion = ContrastiveLoss()
        params = list(self.img_enc.parameters()) + list(self.txt_enc.parameters())
        self.optimizer = torch.optim.Adam(params, lr=lr)
        self.Eiters = 0

    def train_start(self):
        self.img_enc.train()
        self.txt_enc.train()

    def val_start(self):
        self.img_enc.eval()
        self.txt_enc.eval()

    def forward_emb(self, images, captions):
        return self.img_enc(images), self.txt_enc(captions)

    def train_emb(self, images, captions):
        self.Eiters += 1
        img_emb, cap_emb = self.forward_emb(images, captions)
        self.optimizer.zero_grad()
        loss = self.criterion(img_emb, cap_emb)
        loss.backward()
        self.optimizer.step()
        return loss.item()


def validate(val_loader, model):
    model.val_start()
    with torch.no_grad():
        img, cap = model.forward_emb(*val_loader[0])
        r1 = ((img @ cap.t()).argmax(1) == torch.arange(len(img))).float().mean().item()
    return r1


def train(opt, train_loader, model, epoch, val_loader):
    model.train_start()
    for images, captions in train_loader:
        loss = model.train_emb(images, captions)
        if model.Eiters % opt["val_step"] == 0:
            print(f"epoch {epoch} iter {model.Eiters} loss {loss:.3f} R@1 {validate(val_loader, model):.3f}")


def pairs(n_batches, g, bs=32):
    proj = torch.randn(100, 64, generator=torch.Generator().manual_seed(9))
    out = []
    for _ in range(n_batches):
        captions = torch.randint(0, 100, (bs, 6), generator=g)
        images = proj[captions].mean(1) + 0.3 * torch.randn(bs, 64, generator=g)
        out.append((images, captions))
    return out


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    train_loader, val_loader = pairs(40, g), pairs(1, g, bs=100)
    model = VSE()
    for epoch in range(3):
        train({"val_step": 10}, train_loader, model, epoch, val_loader)


if __name__ == "__main__":
    main()
