"""
Shape: a ViT image encoder is wrapped in an `Extractor` module that registers a forward hook on the
ViT's transformer, stores the hooked output in `self.latents` and returns it as image embeddings;
that wrapper is passed as `img_encoder` to a CoCa model whose forward attention-pools the image
tokens and returns caption cross-entropy plus contrastive loss, and the script calls
`loss.backward()` on it.
Bug: the hook stores `t.clone().detach()` of the transformer output, so the image tokens that feed
the caption and contrastive losses are cut from the graph and the image encoder receives no gradient.
Thread: https://github.com/lucidrains/CoCa-pytorch/issues/6
"""
import torch
from torch import nn, einsum
from torch.nn import functional as F
import einops

from vit_pytorch import ViT as VisionTransformer


def exists(v):
    return v is not None


def map_tuple_or_single(fn, v):
    if isinstance(v, tuple):
        return tuple(map(fn, v))
    return fn(v)


class EmbeddingExtractor(nn.Module):
    def __init__(self, vit, layer_name="transformer", return_embeddings_only=False):
        super().__init__()
        self.vit = vit
        self.latents = None
        self.handles = []
        self.hooked = False
        self.target_layer = layer_name
        self.only_embeddings = return_embeddings_only

    def _capture(self, _module, _inputs, output):
        self.latents = map_tuple_or_single(lambda t: t.clone().detach(), output)

    def _attach(self):
        target = getattr(self.vit, self.target_layer)
        self.handles.append(target.register_forward_hook(self._capture))
        self.hooked = True

    def forward(self, img):
        self.latents = None
        if not self.hooked:
            self._attach()
        logits = self.vit(img)
        latents = map_tuple_or_single(lambda t: t.to(img.device), self.latents)
        if self.only_embeddings:
            return latents
        return logits, latents


class CoCaLite(nn.Module):
    def __init__(self, dim, img_encoder, image_dim, text_model, num_img_queries=256,
                 caption_loss_weight=1.0, contrastive_loss_weight=1.0, pad_id=0):
        super().__init__()
        self.image_encoder = img_encoder
        self.text_model = text_model
        self.img_queries = nn.Parameter(torch.randn(num_img_queries + 1, dim))
        self.img_attn_pool = nn.MultiheadAttention(dim, 8, kdim=image_dim, vdim=image_dim,
                                                   batch_first=True)
        self.img_attn_pool_norm = nn.LayerNorm(dim)
        self.temperature = nn.Parameter(torch.tensor(1.0))
        self.w_caption = caption_loss_weight
        self.w_contrast = contrastive_loss_weight
        self.pad_token = pad_id

    def embed_image(self, images):
        tokens = self.image_encoder(images)
        q = einops.repeat(self.img_queries, "n d -> b n d", b=tokens.shape[0])
        q, _ = self.img_attn_pool(q, tokens, tokens)
        q = self.img_attn_pool_norm(q)
        return q[:, 0], q[:, 1:]

    def forward(self, text, images, return_loss=False):
        b = text.shape[0]
        labels = text[:, 1:]
        text = text[:, :-1]
        text_cls, text_tokens = self.text_model.embed(text)
        img_cls, img_tokens = self.embed_image(images)
        logits = self.text_model.decode(text_tokens, img_tokens)
        if return_loss is False:
            return logits
        logits = einops.rearrange(logits, "b n c -> b c n")
        cap = F.cross_entropy(logits, labels, ignore_index=self.pad_token) * self.w_caption
        sim = einsum("i d, j d -> i j", text_cls, img_cls) * self.temperature.exp()
        tgt = torch.arange(b, device=text.device)
        con = (F.cross_entropy(sim, tgt) + F.cross_entropy(sim.t(), tgt)) * 0.5
        return cap + con * self.w_contrast


def train_step(text_model):
    vit = VisionTransformer(image_size=256, patch_size=32, num_classes=1000, dim=1024, depth=6,
              heads=16, mlp_dim=2048)
    vit = EmbeddingExtractor(vit, return_embeddings_only=True)
    coca = CoCaLite(dim=512, img_encoder=vit, image_dim=1024, text_model=text_model).cuda()

    text = torch.randint(0, 20000, (4, 512), device="cuda")
    images = torch.randn(4, 3, 256, 256, device="cuda")

    loss = coca(text=text, images=images, return_loss=True)
    loss.backward()
    return loss.item()
