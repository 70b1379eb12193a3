"""A CoCa-style image-text model in the open_clip layout: an image tower that returns a pooled
embedding plus image tokens, a causal text tower pooled at the end-of-text token, a multimodal text
decoder that cross-attends to the image tokens, and CoCaLoss(ClipLoss) that returns the contrastive
loss and a captioning cross entropy; train_one_epoch() sums the two and steps AdamW with a warmup +
cosine schedule. The tokenizer pads every caption to the context length with token id 0, while the
captioning criterion is nn.CrossEntropyLoss() with its default ignore_index=-100, so every padding
position is a target: most of the caption loss is spent predicting padding after the end-of-text
token and the logged caption loss looks far better than the loss on the real caption words.

Thread: https://github.com/mlfoundations/open_clip/pull/316
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

WORDS = ["a", "photo", "of", "the", "red", "green", "blue", "yellow", "small", "large",
         "dog", "cat", "car", "boat", "tree", "house", "on", "grass", "water", "road"]
PAD, SOT, EOT = 0, 1, 2
VOCAB = len(WORDS) + 3
CONTEXT_LEN = 32


def tokenize(captions, context_length=CONTEXT_LEN):
    out = torch.full((len(captions), context_length), PAD, dtype=torch.long)
    for i, cap in enumerate(captions):
        ids = [SOT] + [WORDS.index(w) + 3 for w in cap.split()] + [EOT]
        out[i, :len(ids)] = torch.tensor(ids[:context_length])
    return out


class VisionTower(nn.Module):
    def __init__(self, in_dim=24, width=64, n_tokens=4, embed_dim=32):
        super().__init__()
        self.n_tokens, self.width = n_tokens, width
        self.trunk = nn.Sequential(nn.Linear(in_dim, 128), nn.GELU(), nn.Linear(128, width * n_tokens))
        self.ln = nn.LayerNorm(width)
        self.proj = nn.Linear(width, embed_dim)

    def forward(self, images):
        tokens = self.ln(self.trunk(images).view(images.size(0), self.n_tokens, self.width))
        return self.proj(tokens.mean(1)), tokens


class TextTower(nn.Module):
    def __init__(self, width=64, embed_dim=32, layers=2):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, width)
        self.pos = nn.Parameter(torch.randn(CONTEXT_LEN, width) * 0.01)
        layer = nn.TransformerEncoderLayer(width, 4, 4 * width, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.ln = nn.LayerNorm(width)
        self.proj = nn.Linear(width, embed_dim)

    def forward(self, text):
        T = text.size(1)
        x = self.tok(text) + self.pos[:T]
        mask = nn.Transformer.generate_square_subsequent_mask(T)
        x = self.ln(self.blocks(x, mask=mask, is_causal=True))
        eot_pos = (text == EOT).int().argmax(dim=1)
        pooled = x[torch.arange(text.size(0)), eot_pos]
        return self.proj(pooled), x


class MultimodalDecoder(nn.Module):
    def __init__(self, width=64, layers=2):
        super().__init__()
        layer = nn.TransformerDecoderLayer(width, 4, 4 * width, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerDecoder(layer, layers)
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, VOCAB)

    def forward(self, image_tokens, text_tokens):
        T = text_tokens.size(1)
        mask = nn.Transformer.generate_square_subsequent_mask(T)
        x = self.blocks(text_tokens, image_tokens, tgt_mask=mask, tgt_is_causal=True)
        return self.head(self.ln(x))


class CoCa(nn.Module):
    def __init__(self):
        super().__init__()
        self.visual = VisionTower()
        self.text = TextTower()
        self.text_decoder = MultimodalDecoder()
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))

    def forward(self, images, text):
        labels = text[:, 1:]
        text_in = text[:, :-1]
        image_latent, image_tokens = self.visual(images)
        text_latent, token_embs = self.text(text_in)
        logits = self.text_decoder(image_tokens, token_embs)
        return {
            "image_features": F.normalize(image_latent, dim=-1),
            "text_features": F.normalize(text_latent, dim=-1),
            "logits": logits,
            "labels": labels,
            "logit_scale": self.logit_scale.exp(),
        }


class ClipLoss(nn.Module):
    def forward(self, image_features, text_features, logit_scale):
        logits_per_image = logit_scale * image_features @ text_features.T
        labels = torch.arange(image_features.size(0))
        return (F.cross_entropy(logits_per_image, labels) + F.cross_entropy(logits_per_image.T, labels)) / 2


class CoCaLoss(ClipLoss):
    def __init__(self, caption_loss_weight, clip_loss_weight):
        super().__init__()
        self.caption_loss_weight = caption_loss_weight
        self.clip_loss_weight = clip_loss_weight
        self.caption_loss = nn.CrossEntropyLoss()

    def forward(self, image_features, text_features, logits, labels, logit_scale, output_dict=False):
        clip_loss = self.clip_loss_weight * super().forward(image_features, text_features, logit_scale)
        caption_loss = self.caption_loss_weight * self.caption_loss(logits.permute(0, 2, 1), labels)
        if output_dict:
            return {"contrastive_loss": clip_loss, "caption_loss": caption_loss}
        return clip_loss, caption_loss


def make_batch(g, batch_size=64):
    colours, objects, places = WORDS[4:8], WORDS[10:16], WORDS[17:20]
    c = torch.randint(0, 4, (batch_size,), generator=g)
    s = torch.randint(0, 2, (batch_size,), generator=g)
    o = torch.randint(0, 6, (batch_size,), generator=g)
    p = torch.randint(0, 3, (batch_size,), generator=g)
    images = torch.zeros(batch_size, 24)
    idx = torch.arange(batch_size)
    images[idx, c] = 1.0
    images[idx, 4 + s] = 1.0
    images[idx, 6 + o] = 1.0
    images[idx, 12 + p] = 1.0
    images += 0.2 * torch.randn(batch_size, 24, generator=g)
    captions = [f"a photo of the {'small' if si == 0 else 'large'} {colours[ci]} {objects[oi]} on {places[pi]}"
                for ci, si, oi, pi in zip(c.tolist(), s.tolist(), o.tolist(), p.tolist())]
    return images, tokenize(captions)


def cosine_lr(optimizer, base_lr, warmup, total):
    def step(i):
        lr = base_lr * (i + 1) / warmup if i < warmup else \
            0.5 * base_lr * (1 + math.cos(math.pi * (i - warmup) / (total - warmup)))
        for group in optimizer.param_groups:
            group["lr"] = lr
    return step


def train_one_epoch(model, data, loss, epoch, optimizer, scheduler, steps_per_epoch):
    model.train()
    for i, (images, texts) in enumerate(data):
        step = steps_per_epoch * epoch + i
        scheduler(step)
        out = model(images, texts)
        losses = loss(**out, output_dict=True)
        total_loss = sum(losses.values())
        optimizer.zero_grad()
        total_loss.backward()
        optimizer.step()
        with torch.no_grad():
            model.logit_scale.clamp_(0, math.log(100))
        if i % 10 == 0:
            print(f"epoch {epoch} step {step} contrastive {losses['contrastive_loss'].item():.4f} "
                  f"caption {losses['caption_loss'].item():.4f}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    steps_per_epoch, epochs = 30, 3
    data = [make_batch(g) for _ in range(steps_per_epoch)]
    model = CoCa()
    loss = CoCaLoss(caption_loss_weight=2.0, clip_loss_weight=1.0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    scheduler = cosine_lr(optimizer, 1e-3, warmup=10, total=steps_per_epoch * epochs)
    for epoch in range(epochs):
        train_one_epoch(model, data, loss, epoch, optimizer, scheduler, steps_per_epoch)


if __name__ == "__main__":
    main()
