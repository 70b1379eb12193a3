"""A single-GPU SAM fine-tuning script without prompts: a train_model(trainloader, valloader, epochs)
function builds a SAM-style model (image_encoder, prompt_encoder, mask_decoder), freezes the image
encoder only when the fine-tuning type is "vanilla" and if_update_encoder is off, hands every
parameter to AdamW, warms the learning rate up by hand and then decays it polynomially, and trains on
a dice loss (sigmoid, squared denominator, one-hot target) plus cross-entropy, evaluating dice every
second epoch.

The bug: the image encoder's forward pass sits inside torch.no_grad() on every training step, whatever
if_update_encoder says. The run asks for the encoder to be fine-tuned (if_update_encoder=True), its
parameters are trainable and in the optimizer, but the embedding it returns carries no graph, so the
encoder never receives a gradient and only the mask decoder and prompt embeddings learn.

Thread: https://github.com/mazurowski-lab/finetune-SAM/issues/5
"""
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class ImageEncoder(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, 4, stride=4)
        self.block = nn.Sequential(nn.Conv2d(dim, dim, 3, padding=1), nn.GELU(), nn.Conv2d(dim, dim, 1))
        self.neck = nn.Conv2d(dim, dim, 1)

    def forward(self, x):
        h = self.patch(x)
        h = h + self.block(h)
        return self.neck(h)


class PromptEncoder(nn.Module):
    def __init__(self, dim=16, grid=8):
        super().__init__()
        self.no_mask_embed = nn.Embedding(1, dim)
        self.pe = nn.Parameter(torch.randn(1, dim, grid, grid) * 0.1)
        self.dim = dim
        self.grid = grid

    def get_dense_pe(self):
        return self.pe

    def forward(self, points=None, boxes=None, masks=None, batch=1):
        sparse = torch.zeros(batch, 0, self.dim)
        dense = self.no_mask_embed.weight.reshape(1, -1, 1, 1).expand(batch, -1, self.grid, self.grid)
        return sparse, dense


class MaskDecoder(nn.Module):
    def __init__(self, dim=16, num_cls=3):
        super().__init__()
        self.mix = nn.Sequential(nn.Conv2d(dim, dim, 3, padding=1), nn.GELU())
        self.up = nn.ConvTranspose2d(dim, dim, 4, stride=4)
        self.head = nn.Conv2d(dim, num_cls, 1)

    def forward(self, image_embeddings, image_pe, sparse_prompt_embeddings, dense_prompt_embeddings,
                multimask_output=True):
        h = self.mix(image_embeddings + image_pe + dense_prompt_embeddings)
        return self.head(F.gelu(self.up(h))), None


class Sam(nn.Module):
    def __init__(self, num_cls):
        super().__init__()
        self.image_encoder = ImageEncoder()
        self.prompt_encoder = PromptEncoder()
        self.mask_decoder = MaskDecoder(num_cls=num_cls)


def soft_dice_loss(logits, target, num_cls, eps=1e-5):
    prob = torch.sigmoid(logits)
    onehot = F.one_hot(target.squeeze(1).long(), num_cls).permute(0, 3, 1, 2).float()
    inter = (prob * onehot).sum((2, 3))
    denom = (prob ** 2).sum((2, 3)) + (onehot ** 2).sum((2, 3))
    return (1 - (2 * inter + eps) / (denom + eps)).mean()


def dice_per_class(pred, target, num_cls):
    scores = []
    for c in range(1, num_cls):
        p, t = pred == c, target == c
        scores.append((2 * (p & t).sum() + 1e-5) / (p.sum() + t.sum() + 1e-5))
    return torch.stack(scores).mean().item()


def forward_sam(sam, imgs):
    with torch.no_grad():
        img_emb = sam.image_encoder(imgs)
    sparse_emb, dense_emb = sam.prompt_encoder(points=None, boxes=None, masks=None, batch=imgs.shape[0])
    pred, _ = sam.mask_decoder(image_embeddings=img_emb, image_pe=sam.prompt_encoder.get_dense_pe(),
                               sparse_prompt_embeddings=sparse_emb, dense_prompt_embeddings=dense_emb,
                               multimask_output=True)
    return pred


def train_model(args, trainloader, valloader, epochs):
    b_lr = args.lr / args.warmup_period if args.if_warmup else args.lr
    sam = Sam(args.num_cls)
    if args.finetune_type == "vanilla" and not args.if_update_encoder:
        for _, value in sam.image_encoder.named_parameters():
            value.requires_grad = False
    optimizer = torch.optim.AdamW(sam.parameters(), lr=b_lr, betas=(0.9, 0.999), weight_decay=0.1)
    optimizer.zero_grad()
    ce = nn.CrossEntropyLoss()
    iter_num, max_iterations = 0, epochs * len(trainloader)
    for epoch in range(epochs):
        sam.train()
        train_loss = 0.0
        for imgs, msks in trainloader:
            pred = forward_sam(sam, imgs)
            loss = soft_dice_loss(pred, msks, args.num_cls) + ce(pred, msks.squeeze(1).long())
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if args.if_warmup and iter_num < args.warmup_period:
                lr_ = args.lr * ((iter_num + 1) / args.warmup_period)
            else:
                shift = iter_num - args.warmup_period if args.if_warmup else iter_num
                lr_ = args.lr * (1.0 - shift / max_iterations) ** 0.9
            for group in optimizer.param_groups:
                group["lr"] = lr_
            train_loss += loss.item()
            iter_num += 1
        print(f"epoch {epoch} train loss {train_loss / len(trainloader):.4f}")
        if epoch % 2 == 0:
            sam.eval()
            dsc = 0.0
            with torch.no_grad():
                for imgs, msks in valloader:
                    pred = forward_sam(sam, imgs)
                    dsc += dice_per_class(pred.argmax(1), msks.squeeze(1).long(), args.num_cls)
            print(f"  eval epoch {epoch} dsc {dsc / len(valloader):.4f}")
    return sam


def make_split(n, gen):
    imgs = torch.rand(n, 3, 32, 32, generator=gen) * 0.3
    msks = torch.zeros(n, 1, 32, 32)
    yy, xx = torch.meshgrid(torch.arange(32.0), torch.arange(32.0), indexing="ij")
    for i in range(n):
        r, c = torch.randint(2, 16, (2,), generator=gen).tolist()
        msks[i, 0, r:r + 10, c:c + 10] = 1
        cy, cx = torch.randint(10, 24, (2,), generator=gen).tolist()
        disk = ((yy - cy) ** 2 + (xx - cx) ** 2) < 25
        msks[i, 0][disk] = 2
    # the two structures differ in texture (stripes vs flat), not in brightness
    stripes = (torch.arange(32) % 2).float().reshape(1, 32)
    imgs = imgs + (msks == 1).float() * 0.5 * stripes + (msks == 2).float() * 0.25
    return TensorDataset(imgs, msks)


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    train_set, val_set = make_split(160, gen), make_split(48, gen)
    trainloader = DataLoader(train_set, batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(1))
    valloader = DataLoader(val_set, batch_size=8, shuffle=False)
    args = SimpleNamespace(finetune_type="vanilla", if_update_encoder=True, num_cls=3, lr=3e-3,
                           if_warmup=True, warmup_period=10)
    train_model(args, trainloader, valloader, epochs=5)


if __name__ == "__main__":
    main()
