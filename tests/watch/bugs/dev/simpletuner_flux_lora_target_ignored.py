"""A SimpleTuner-style LoRA trainer after the "v2" model refactor: every model family subclasses a
ModelFoundation whose add_lora_adapter() builds a LoraConfig from self.get_lora_target_layers()
and injects it into the frozen transformer; the Trainer then optimises only the adapter weights
with a flow-matching loss. The base get_lora_target_layers() returns the class's
DEFAULT_LORA_TARGET (to_q / to_k / to_v / to_out.0) for a standard LoRA, and the Flux subclass was
meant to override it with the config-driven flux_lora_target choices ("all", "context",
"all+ffs", ...) but the override was left behind in the refactor. A run configured with
flux_lora_target="all+ffs" therefore trains adapters on the image-stream attention projections
only: the feed-forward, context-stream and single-block projections it asked for are never
wrapped, nothing warns, and the LoRA plateaus well above what the requested targets reach.

Thread: https://github.com/bghira/SimpleTuner/issues/1393
"""
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


# --------------------------------------------------------------------------- tiny Flux-like DiT
class Attention(nn.Module):
    def __init__(self, dim, heads, context=False, pre_only=False):
        super().__init__()
        self.heads = heads
        self.to_q, self.to_k, self.to_v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        if not pre_only:
            self.to_out = nn.ModuleList([nn.Linear(dim, dim)])
        if context:
            self.add_q_proj, self.add_k_proj, self.add_v_proj = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
            self.to_add_out = nn.Linear(dim, dim)

    def _split(self, x):
        b, t, d = x.shape
        return x.view(b, t, self.heads, d // self.heads).transpose(1, 2)

    def forward(self, x, ctx=None):
        q, k, v = self.to_q(x), self.to_k(x), self.to_v(x)
        if ctx is not None:
            q = torch.cat([self.add_q_proj(ctx), q], 1)
            k = torch.cat([self.add_k_proj(ctx), k], 1)
            v = torch.cat([self.add_v_proj(ctx), v], 1)
        out = F.scaled_dot_product_attention(self._split(q), self._split(k), self._split(v))
        out = out.transpose(1, 2).flatten(2)
        if ctx is None:
            return out
        n = ctx.shape[1]
        return self.to_out[0](out[:, n:]), self.to_add_out(out[:, :n])


class GELUProj(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.proj = nn.Linear(dim, hidden)

    def forward(self, x):
        return F.gelu(self.proj(x), approximate="tanh")


class FeedForward(nn.Module):
    def __init__(self, dim, mult=4):
        super().__init__()
        self.net = nn.ModuleList([GELUProj(dim, mult * dim), nn.Identity(), nn.Linear(mult * dim, dim)])

    def forward(self, x):
        for m in self.net:
            x = m(x)
        return x


class FluxTransformerBlock(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1, self.norm1_context = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, context=True)
        self.norm2, self.norm2_context = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.ff, self.ff_context = FeedForward(dim), FeedForward(dim)

    def forward(self, x, ctx, temb):
        a, c = self.attn(self.norm1(x) + temb, self.norm1_context(ctx))
        x, ctx = x + a, ctx + c
        return x + self.ff(self.norm2(x)), ctx + self.ff_context(self.norm2_context(ctx))


class FluxSingleTransformerBlock(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, pre_only=True)
        self.proj_mlp = nn.Linear(dim, 4 * dim)
        self.proj_out = nn.Linear(5 * dim, dim)

    def forward(self, h, temb):
        n = self.norm(h) + temb
        return h + self.proj_out(torch.cat([self.attn(n), F.gelu(self.proj_mlp(n), approximate="tanh")], -1))


class FluxTransformer2DModel(nn.Module):
    def __init__(self, in_channels=16, dim=32, heads=4, depth=2, single_depth=2):
        super().__init__()
        self.x_embedder, self.context_embedder = nn.Linear(in_channels, dim), nn.Linear(24, dim)
        self.time_embed = nn.Sequential(nn.Linear(1, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.transformer_blocks = nn.ModuleList([FluxTransformerBlock(dim, heads) for _ in range(depth)])
        self.single_transformer_blocks = nn.ModuleList([FluxSingleTransformerBlock(dim, heads) for _ in range(single_depth)])
        self.norm_out, self.proj_out = nn.LayerNorm(dim), nn.Linear(dim, in_channels)

    def forward(self, hidden_states, encoder_hidden_states, timestep):
        x, ctx = self.x_embedder(hidden_states), self.context_embedder(encoder_hidden_states)
        temb = self.time_embed(timestep[:, None, None])
        for blk in self.transformer_blocks:
            x, ctx = blk(x, ctx, temb)
        h = torch.cat([ctx, x], 1)
        for blk in self.single_transformer_blocks:
            h = blk(h, temb)
        return self.proj_out(self.norm_out(h[:, ctx.shape[1]:]))


# --------------------------------------------------------------------------- minimal LoRA (PEFT-like)
@dataclass
class LoraConfig:
    r: int
    lora_alpha: int
    target_modules: list
    init_lora_weights: str = "gaussian"


class LoraLinear(nn.Module):
    def __init__(self, base, r, alpha):
        super().__init__()
        self.base_layer, self.scaling = base, alpha / r
        self.lora_A = nn.Linear(base.in_features, r, bias=False)
        self.lora_B = nn.Linear(r, base.out_features, bias=False)
        nn.init.normal_(self.lora_A.weight, std=1 / r)
        nn.init.zeros_(self.lora_B.weight)

    def forward(self, x):
        return self.base_layer(x) + self.lora_B(self.lora_A(x)) * self.scaling


def _matches(name, targets):
    return any(name == t or name.endswith("." + t) for t in targets)


def inject_adapter_in_model(config, model):
    for name, module in list(model.named_modules()):
        if isinstance(module, nn.Linear) and _matches(name, config.target_modules):
            parent_name, _, child = name.rpartition(".")
            setattr(model.get_submodule(parent_name), child, LoraLinear(module, config.r, config.lora_alpha))
    for n, p in model.named_parameters():
        p.requires_grad_("lora_" in n)
    return model


# --------------------------------------------------------------------------- model foundation
class ModelFoundation:
    DEFAULT_LORA_TARGET = ["to_k", "to_q", "to_v", "to_out.0"]
    DEFAULT_LYCORIS_TARGET = ["Attention"]

    def __init__(self, config, transformer):
        self.config, self.model = config, transformer

    def get_lora_target_layers(self):
        # Some models, eg. Flux should override this with more complex config-driven logic.
        if self.config.lora_type.lower() == "standard":
            return self.DEFAULT_LORA_TARGET
        elif self.config.lora_type.lower() == "lycoris":
            return self.DEFAULT_LYCORIS_TARGET
        raise NotImplementedError(f"Unknown LoRA target type {self.config.lora_type}.")

    def add_lora_adapter(self):
        target_modules = self.get_lora_target_layers()
        self.lora_config = LoraConfig(r=self.config.lora_rank, lora_alpha=self.config.lora_alpha or self.config.lora_rank,
                                      target_modules=target_modules)
        self.model = inject_adapter_in_model(self.lora_config, self.model)


class Flux(ModelFoundation):
    DEFAULT_LORA_TARGET = ["to_k", "to_q", "to_v", "to_out.0"]
    # Only training the Attention blocks by default.


@dataclass
class TrainConfig:
    lora_type: str = "standard"
    flux_lora_target: str = "all+ffs"
    lora_rank: int = 8
    lora_alpha: int = 8
    learning_rate: float = 2e-3
    train_batch_size: int = 16
    max_train_steps: int = 100


# --------------------------------------------------------------------------- data: the concept to learn
def make_teacher(base, seed=7):
    """The 'target concept': the base model with its feed-forward paths shifted."""
    teacher = FluxTransformer2DModel()
    teacher.load_state_dict(base.state_dict())
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in teacher.named_parameters():
            if any(k in name for k in ("ff.net", "ff_context.net", "proj_mlp", "single_transformer_blocks.0.proj_out")) and p.dim() == 2:
                p.add_(0.6 * p.std() * torch.randn(p.shape, generator=g))
    return teacher.eval()


def sample_batch(g, bsz):
    text = torch.randn(bsz, 8, 24, generator=g)
    x0 = torch.randn(bsz, 16, 16, generator=g)
    noise = torch.randn(bsz, 16, 16, generator=g)
    t = torch.rand(bsz, generator=g)
    return text, x0, noise, t


class Trainer:
    def __init__(self, config, model_foundation, teacher):
        self.config, self.model, self.teacher = config, model_foundation, teacher

    def init_trainable_peft_adapter(self):
        self.model.add_lora_adapter()
        params = [p for p in self.model.model.parameters() if p.requires_grad]
        n_lora = sum("lora_A" in n for n, _ in self.model.model.named_parameters())
        print(f"LoRA target: {self.config.flux_lora_target}; wrapped {n_lora} linear layers, "
              f"{sum(p.numel() for p in params):,} trainable parameters")
        self.optimizer = torch.optim.AdamW(params, lr=self.config.learning_rate, weight_decay=1e-2)

    def train(self):
        g = torch.Generator().manual_seed(0)
        transformer = self.model.model
        transformer.train()
        running = None
        for step in range(1, self.config.max_train_steps + 1):
            text, x0, noise, t = sample_batch(g, self.config.train_batch_size)
            noisy = (1 - t[:, None, None]) * x0 + t[:, None, None] * noise
            with torch.no_grad():
                target = self.teacher(noisy, text, t)
            pred = transformer(noisy, text, t)
            loss = F.mse_loss(pred, target)
            loss.backward()
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            running = loss.item() if running is None else 0.9 * running + 0.1 * loss.item()
            if step % 20 == 0:
                print(f"step {step}: loss {running:.5f}")


def main():
    torch.manual_seed(0)
    config = TrainConfig()
    base = FluxTransformer2DModel()
    teacher = make_teacher(base)
    trainer = Trainer(config, Flux(config, base), teacher)
    trainer.init_trainable_peft_adapter()
    trainer.train()


if __name__ == "__main__":
    main()
