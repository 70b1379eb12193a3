"""A Stable-Diffusion-style textual inversion script: a placeholder token is added to the tokenizer, the
text encoder's token-embedding matrix is resized and the new row initialised from the initializer
token, the VAE, the UNet and every text-encoder module except the token embedding are frozen, and
AdamW (default adam_weight_decay=1e-2, learning rate scaled by gradient accumulation and batch size)
is given text_encoder.get_input_embeddings().parameters(), i.e. the whole embedding matrix. An
Accelerate-like wrapper accumulates gradients over 4 micro-batches. After each backward the
gradients of every row except the placeholder's are overwritten with zeros, and the script relies on
that to keep the pretrained word embeddings fixed. The zero-filled rows are still in AdamW's update:
its decoupled weight decay shrinks every pretrained word embedding a little at each optimizer step,
so the vocabulary the placeholder is meant to be learned against decays toward zero during training.

Thread: https://github.com/huggingface/diffusers/issues/1176
"""
import contextlib
import math

import torch
import torch.nn.functional as F
from torch import nn


class MiniAccelerator:
    def __init__(self, gradient_accumulation_steps):
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.step = 0
        self.sync_gradients = True

    @contextlib.contextmanager
    def accumulate(self, model):
        self.step += 1
        self.sync_gradients = self.step % self.gradient_accumulation_steps == 0
        yield

    def backward(self, loss):
        (loss / self.gradient_accumulation_steps).backward()

    def prepare_optimizer(self, optimizer):
        accelerator = self

        class AcceleratedOptimizer:
            def __init__(self, inner):
                self.optimizer = inner
                self.param_groups = inner.param_groups

            def step(self):
                if accelerator.sync_gradients:
                    self.optimizer.step()

            def zero_grad(self):
                if accelerator.sync_gradients:
                    self.optimizer.zero_grad()

        return AcceleratedOptimizer(optimizer)


class TextEncoder(nn.Module):
    def __init__(self, vocab=1000, dim=32, seq=8, layers=2):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, dim)
        self.position_embedding = nn.Embedding(seq, dim)
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(dim, 4, 4 * dim, dropout=0.0, batch_first=True, norm_first=True), layers,
            enable_nested_tensor=False)
        self.final_layer_norm = nn.LayerNorm(dim)

    def get_input_embeddings(self):
        return self.token_embedding

    def resize_token_embeddings(self, new_size):
        old = self.token_embedding
        new = nn.Embedding(new_size, old.embedding_dim)
        with torch.no_grad():
            new.weight[: old.num_embeddings] = old.weight
        self.token_embedding = new

    def forward(self, input_ids):
        h = self.token_embedding(input_ids) + self.position_embedding.weight[: input_ids.shape[1]]
        return (self.final_layer_norm(self.encoder(h)),)


class UNet(nn.Module):
    def __init__(self, ch=32, ctx_dim=32):
        super().__init__()
        self.conv_in = nn.Conv2d(4, ch, 3, padding=1)
        self.temb = nn.Linear(ch, ch)
        self.attn = nn.MultiheadAttention(ch, 4, kdim=ctx_dim, vdim=ctx_dim, batch_first=True)
        self.conv_out = nn.Conv2d(ch, 4, 3, padding=1)
        self.ch = ch

    def forward(self, x, timesteps, encoder_hidden_states):
        half = self.ch // 2
        t = timesteps.float()[:, None] * torch.exp(-math.log(10000) * torch.arange(half) / half)[None]
        h = self.conv_in(x) + self.temb(torch.cat([t.sin(), t.cos()], 1))[:, :, None, None]
        b, c, hh, ww = h.shape
        seq = h.flatten(2).transpose(1, 2)
        seq = seq + self.attn(seq, encoder_hidden_states, encoder_hidden_states, need_weights=False)[0]
        return self.conv_out(F.silu(seq.transpose(1, 2).reshape(b, c, hh, ww)))


def freeze_params(params):
    for p in params:
        p.requires_grad = False


def object_batches(n, placeholder_token_id, res=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, res), torch.linspace(-1, 1, res), indexing="ij")
    toy = torch.stack([((xx ** 2 + yy ** 2) < 0.4).float() * 2 - 1, torch.sin(4 * xx), torch.cos(4 * yy)])
    templates = [[1, 7, 9, placeholder_token_id, 2, 0, 0, 0], [1, 7, 33, 9, placeholder_token_id, 2, 0, 0],
                 [1, 55, 9, placeholder_token_id, 2, 0, 0, 0]]
    out = []
    for _ in range(n):
        sx, sy = torch.randint(-2, 3, (2,), generator=g).tolist()
        img = torch.roll(toy, (sx, sy), (1, 2)) + 0.05 * torch.randn(toy.shape, generator=g)
        ids = templates[int(torch.randint(0, len(templates), (1,), generator=g))]
        out.append({"pixel_values": img[None].clamp(-1, 1), "input_ids": torch.tensor([ids])})
    return out


def main(args):
    torch.manual_seed(args["seed"])
    accelerator = MiniAccelerator(args["gradient_accumulation_steps"])
    vocab_size = 1000
    text_encoder, unet = TextEncoder(vocab_size), UNet()
    vae_encoder = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.SiLU(), nn.Conv2d(8, 4, 3, 1, 1))

    # add the placeholder token and initialise it from the initializer token
    placeholder_token_id, initializer_token_id = vocab_size, 311
    text_encoder.resize_token_embeddings(vocab_size + 1)
    token_embeds = text_encoder.get_input_embeddings().weight.data
    token_embeds[placeholder_token_id] = token_embeds[initializer_token_id]

    freeze_params(vae_encoder.parameters())
    freeze_params(unet.parameters())
    freeze_params(list(text_encoder.encoder.parameters()) + list(text_encoder.final_layer_norm.parameters())
                  + list(text_encoder.position_embedding.parameters()))

    if args["scale_lr"]:
        args["learning_rate"] = args["learning_rate"] * args["gradient_accumulation_steps"] * args["train_batch_size"]
    optimizer = torch.optim.AdamW(
        text_encoder.get_input_embeddings().parameters(),  # only optimize the embeddings
        lr=args["learning_rate"], betas=(0.9, 0.999), weight_decay=args["adam_weight_decay"], eps=1e-8)
    lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    optimizer = accelerator.prepare_optimizer(optimizer)

    betas = torch.linspace(0.00085 ** 0.5, 0.012 ** 0.5, 1000) ** 2
    alphas_cumprod = torch.cumprod(1 - betas, 0)
    train_dataloader = object_batches(args["max_train_steps"] * args["gradient_accumulation_steps"], placeholder_token_id)
    orig_word_norm = token_embeds[:vocab_size].norm(dim=1).mean().item()

    vae_encoder.eval()
    unet.eval()
    text_encoder.train()
    global_step = 0
    for step, batch in enumerate(train_dataloader):
        with accelerator.accumulate(text_encoder):
            latents = vae_encoder(batch["pixel_values"]).detach() * 0.18215
            noise = torch.randn(latents.shape)
            timesteps = torch.randint(0, 1000, (latents.shape[0],)).long()
            a = alphas_cumprod[timesteps].view(-1, 1, 1, 1)
            noisy_latents = a.sqrt() * latents + (1 - a).sqrt() * noise

            encoder_hidden_states = text_encoder(batch["input_ids"])[0]
            model_pred = unet(noisy_latents, timesteps, encoder_hidden_states)
            loss = F.mse_loss(model_pred, noise, reduction="none").mean([1, 2, 3]).mean()
            accelerator.backward(loss)

            # zero out the gradients for all token embeddings except the newly added one
            grads = text_encoder.get_input_embeddings().weight.grad
            index_grads_to_zero = torch.arange(vocab_size + 1) != placeholder_token_id
            grads.data[index_grads_to_zero, :] = grads.data[index_grads_to_zero, :].fill_(0)

            optimizer.step()
            if accelerator.sync_gradients:
                lr_scheduler.step()
            optimizer.zero_grad()

        if accelerator.sync_gradients:
            global_step += 1
            if global_step % 10 == 0:
                word_norm = text_encoder.get_input_embeddings().weight.data[:vocab_size].norm(dim=1).mean().item()
                print(f"step {global_step} loss {loss.item():.4f} mean word-embedding norm {word_norm:.5f} "
                      f"(start {orig_word_norm:.5f})")


if __name__ == "__main__":
    main({"seed": 0, "learning_rate": 5e-4, "scale_lr": True, "train_batch_size": 1, "gradient_accumulation_steps": 4,
          "adam_weight_decay": 1e-2, "max_train_steps": 70})
