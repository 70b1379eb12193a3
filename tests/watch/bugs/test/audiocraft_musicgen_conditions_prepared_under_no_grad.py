"""A MusicGen-style text-to-music solver: MusicGenSolver.run_step() calls
_prepare_tokens_and_attributes(batch), which encodes the audio with a frozen compression model and runs
the condition provider (a frozen text encoder followed by a trainable output_proj Linear) to get the
cross-attention conditions; the language model then predicts the K codebook streams, the per-codebook
cross entropy is averaged, and backward / clip_grad_norm_ / optimizer.step() / lr_scheduler.step() /
zero_grad() follow. _prepare_tokens_and_attributes is decorated with @torch.no_grad(), so the
condition tensors carry no graph: the conditioner's output_proj, which the optimizer holds and which
is meant to be trained with the language model, never receives a gradient and stays at its random
initialisation for the whole run while the loss goes down as usual.

Thread: https://github.com/facebookresearch/audiocraft/pull/335
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

GENRES = ["calm piano", "fast drums", "slow strings", "bright synth"]
TEXT_VOCAB = ["calm", "piano", "fast", "drums", "slow", "strings", "bright", "synth", "music", "with"]
K, CARD, FRAME = 2, 16, 8


class CompressionModel(nn.Module):
    """Frozen tokenizer: each frame of samples is mapped to one code per codebook."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(123)
        self.register_buffer("codebooks", torch.randn(K, FRAME, CARD, generator=g))

    @torch.no_grad()
    def encode(self, audio):
        frames = audio.view(audio.size(0), -1, FRAME)
        codes = torch.einsum("btf,kfc->bktc", frames, self.codebooks).argmax(-1)
        return codes, None


class T5Conditioner(nn.Module):
    def __init__(self, output_dim, finetune=False, dim=32):
        super().__init__()
        self.finetune = finetune
        self.t5 = nn.Embedding(len(TEXT_VOCAB) + 1, dim)
        self.t5.requires_grad_(finetune)
        self.output_proj = nn.Linear(dim, output_dim)

    def tokenize(self, descriptions):
        ids = [[TEXT_VOCAB.index(w) + 1 for w in d.split()] for d in descriptions]
        width = max(len(i) for i in ids)
        return torch.tensor([i + [0] * (width - len(i)) for i in ids])

    def forward(self, tokens):
        with torch.set_grad_enabled(self.finetune):
            embeds = self.t5(tokens)
        return self.output_proj(embeds), (tokens != 0)


class ConditionProvider(nn.Module):
    def __init__(self, output_dim):
        super().__init__()
        self.conditioners = nn.ModuleDict({"description": T5Conditioner(output_dim)})

    def tokenize(self, attributes):
        return {"description": self.conditioners["description"].tokenize(attributes)}

    def forward(self, tokenized):
        return {name: cond(tokenized[name]) for name, cond in self.conditioners.items()}


class LMModel(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.condition_provider = ConditionProvider(dim)
        self.emb = nn.ModuleList([nn.Embedding(CARD + 1, dim) for _ in range(K)])
        self.pos = nn.Parameter(torch.randn(64, dim) * 0.02)
        layer = nn.TransformerDecoderLayer(dim, 4, 4 * dim, dropout=0.1, batch_first=True, norm_first=True)
        self.transformer = nn.TransformerDecoder(layer, 2)
        self.linears = nn.ModuleList([nn.Linear(dim, CARD) for _ in range(K)])
        self.special_token_id = CARD

    def compute_predictions(self, codes, condition_tensors):
        B, _, T = codes.shape
        inp = torch.cat([torch.full((B, K, 1), self.special_token_id), codes[:, :, :-1]], dim=2)
        x = sum(self.emb[k](inp[:, k]) for k in range(K)) + self.pos[:T]
        cond, cond_mask = condition_tensors["description"]
        mask = nn.Transformer.generate_square_subsequent_mask(T)
        h = self.transformer(x, cond, tgt_mask=mask, tgt_is_causal=True, memory_key_padding_mask=~cond_mask)
        return torch.stack([self.linears[k](h) for k in range(K)], dim=1)


class MusicGenSolver:
    def __init__(self, model, compression_model, lr=1e-3, max_norm=1.0, total_steps=75):
        self.model, self.compression_model = model, compression_model
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
        warmup = 10
        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: (s + 1) / warmup if s < warmup else
            0.5 * (1 + math.cos(math.pi * (s - warmup) / (total_steps - warmup))))
        self.max_norm = max_norm

    def _compute_cross_entropy(self, logits, targets):
        ce_per_codebook = [F.cross_entropy(logits[:, k].reshape(-1, CARD), targets[:, k].reshape(-1))
                           for k in range(K)]
        return sum(ce_per_codebook) / K, ce_per_codebook

    @torch.no_grad()
    def _prepare_tokens_and_attributes(self, batch):
        audio, descriptions = batch
        tokenized = self.model.condition_provider.tokenize(descriptions)
        with torch.no_grad():
            audio_tokens, scale = self.compression_model.encode(audio)
        condition_tensors = self.model.condition_provider(tokenized)
        return condition_tensors, audio_tokens

    def run_step(self, idx, batch, metrics):
        condition_tensors, audio_tokens = self._prepare_tokens_and_attributes(batch)
        logits = self.model.compute_predictions(audio_tokens, condition_tensors)
        ce, ce_per_codebook = self._compute_cross_entropy(logits, audio_tokens)
        loss = ce
        loss.backward()
        metrics["grad_norm"] = nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm).item()
        self.optimizer.step()
        self.lr_scheduler.step()
        self.optimizer.zero_grad()
        metrics["ce"] = ce.item()
        metrics["lr"] = self.optimizer.param_groups[0]["lr"]
        return metrics

    def train(self, loader, epochs):
        self.model.train()
        step = 0
        for epoch in range(epochs):
            for idx, batch in enumerate(loader):
                metrics = self.run_step(idx, batch, {})
                if step % 10 == 0:
                    print(f"epoch {epoch} step {step} ce {metrics['ce']:.4f} grad_norm {metrics['grad_norm']:.3f}")
                step += 1


def make_batch(g, batch_size=16, n_samples=256):
    genre = torch.randint(0, len(GENRES), (batch_size,), generator=g)
    t = torch.arange(n_samples, dtype=torch.float32)
    freq = (0.05 + 0.08 * genre.float()).unsqueeze(1)
    phase = 6.28 * torch.rand(batch_size, 1, generator=g)
    audio = torch.sin(freq * t + phase) + 0.3 * torch.randn(batch_size, n_samples, generator=g)
    descriptions = [GENRES[i] + " music" for i in genre.tolist()]
    return audio, descriptions


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    loader = [make_batch(g) for _ in range(25)]
    solver = MusicGenSolver(LMModel(), CompressionModel())
    solver.train(loader, epochs=3)


if __name__ == "__main__":
    main()
