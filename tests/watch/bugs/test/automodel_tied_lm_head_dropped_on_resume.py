"""An Automodel-style next-token-prediction recipe: the model is built from a config with
tie_word_embeddings=True on the meta device (its __init__ ties lm_head.weight to
embed_tokens.weight), then materialized with to_empty() and initialized; a Checkpointer saves the
model state and, because the config says the embeddings are tied, leaves lm_head.weight out as
redundant; on resume it loads the state non-strictly and rebuilds lm_head.weight from
embed_tokens.weight. But to_empty() materializes the two modules' parameters separately, so the
tie no longer exists in the model that trains: the head is an independent parameter that drifts
away from the embedding. Saving drops the trained head, and the resumed run continues with a head
equal to the input embedding, so the first steps after resume show a large loss jump and part of
the training is silently thrown away. The save/resume round trip is kept in memory.

Thread: https://github.com/NVIDIA-NeMo/Automodel/pull/2511
"""
import copy
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class ModelConfig:
    vocab_size: int = 96
    hidden_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    max_position_embeddings: int = 32
    tie_word_embeddings: bool = True


class DecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.input_layernorm = nn.LayerNorm(cfg.hidden_size)
        self.self_attn = nn.MultiheadAttention(cfg.hidden_size, cfg.num_attention_heads, batch_first=True)
        self.post_attention_layernorm = nn.LayerNorm(cfg.hidden_size)
        self.mlp = nn.Sequential(nn.Linear(cfg.hidden_size, 4 * cfg.hidden_size), nn.SiLU(),
                                 nn.Linear(4 * cfg.hidden_size, cfg.hidden_size))

    def forward(self, x, mask):
        h = self.input_layernorm(x)
        x = x + self.self_attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.post_attention_layernorm(x))


class TinyLlamaForCausalLM(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.embed_positions = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.layers = nn.ModuleList([DecoderLayer(config) for _ in range(config.num_hidden_layers)])
        self.norm = nn.LayerNorm(config.hidden_size)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight

    def initialize_weights(self):
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.05)
                if getattr(m, "bias", None) is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.MultiheadAttention):
                nn.init.normal_(m.in_proj_weight, std=0.05)
                nn.init.zeros_(m.in_proj_bias)
                nn.init.zeros_(m.out_proj.bias)

    def forward(self, input_ids, labels=None):
        t = input_ids.size(1)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        x = self.embed_tokens(input_ids) + self.embed_positions(torch.arange(t))
        for layer in self.layers:
            x = layer(x, mask)
        logits = self.lm_head(self.norm(x))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1))
        return logits, loss


def build_model_from_config(config, seed):
    """Meta-device construction, then materialize and initialize, as for large from-config runs."""
    torch.manual_seed(seed)
    with torch.device("meta"):
        model = TinyLlamaForCausalLM(config)
    model = model.to_empty(device="cpu")
    model.initialize_weights()
    return model


class Checkpointer:
    def __init__(self):
        self.storage = {}

    def save_model(self, model, optimizer, step):
        state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        if model.config.tie_word_embeddings:
            state.pop("lm_head.weight", None)  # tied: stored once, under the embedding
        self.storage = {"model": state, "optim": copy.deepcopy(optimizer.state_dict()), "step": step}

    def load_model(self, model, optimizer):
        state = self.storage["model"]
        missing, _ = model.load_state_dict(state, strict=False)
        if model.config.tie_word_embeddings and "lm_head.weight" in missing:
            with torch.no_grad():
                model.lm_head.weight.copy_(model.embed_tokens.weight)
        optimizer.load_state_dict(self.storage["optim"])
        return self.storage["step"]


def make_corpus(n_seq, seq_len, vocab, seed):
    g = torch.Generator().manual_seed(seed)
    nxt = torch.randint(0, vocab, (vocab, 2), generator=torch.Generator().manual_seed(5))
    seqs = torch.empty(n_seq, seq_len, dtype=torch.long)
    seqs[:, 0] = torch.randint(0, vocab, (n_seq,), generator=g)
    pick = torch.randint(0, 2, (n_seq, seq_len), generator=g)
    for t in range(1, seq_len):
        seqs[:, t] = nxt[seqs[:, t - 1], pick[:, t]]
    return seqs


class TrainFinetuneRecipeForNextTokenPrediction:
    def __init__(self, config, batch_size=16, lr=3e-3):
        self.config, self.batch_size, self.lr = config, batch_size, lr
        self.data = make_corpus(4096, config.max_position_embeddings, config.vocab_size, seed=1)
        self.checkpointer = Checkpointer()
        self.step = 0

    def setup(self, seed):
        self.model = build_model_from_config(self.config, seed)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=self.lr, weight_decay=0.0)

    def _batch(self):
        g = torch.Generator().manual_seed(1000 + self.step)
        return self.data[torch.randint(0, len(self.data), (self.batch_size,), generator=g)]

    def run_train_steps(self, num_steps, log_every=10, tag="train"):
        self.model.train()
        for _ in range(num_steps):
            batch = self._batch()
            _, loss = self.model(batch, labels=batch)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.optimizer.step()
            self.optimizer.zero_grad()
            self.step += 1
            if self.step % log_every == 0 or tag == "resume" and self.step % log_every < 3:
                print(f"[{tag}] step {self.step} loss {loss.item():.4f}")


def main():
    config = ModelConfig()
    recipe = TrainFinetuneRecipeForNextTokenPrediction(config)
    recipe.setup(seed=0)
    print(f"config.tie_word_embeddings={config.tie_word_embeddings}")
    recipe.run_train_steps(90)
    recipe.checkpointer.save_model(recipe.model, recipe.optimizer, recipe.step)
    print(f"checkpoint saved at step {recipe.step} ({len(recipe.checkpointer.storage['model'])} tensors)")

    # job preempted: a new process rebuilds the model from config and resumes
    resumed = TrainFinetuneRecipeForNextTokenPrediction(config)
    resumed.checkpointer = recipe.checkpointer  # same checkpoint directory
    resumed.setup(seed=1)
    resumed.step = resumed.checkpointer.load_model(resumed.model, resumed.optimizer)
    print(f"resumed from step {resumed.step}")
    resumed.run_train_steps(60, tag="resume")


if __name__ == "__main__":
    main()
