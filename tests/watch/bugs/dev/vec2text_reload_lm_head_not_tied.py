"""vec2text-style inversion model: a PreTrainedModel subclass (`InversionModel`) wraps a T5-like
encoder-decoder whose `lm_head` is tied to the shared token embedding; a projection turns a frozen
sentence embedding into `num_repeat_tokens` encoder input vectors and the decoder is trained to
write the text back. Training is fine, `save_pretrained` stores the tied matrix once (the
`lm_head.weight` key is dropped as a duplicate), but `InversionModel.from_pretrained` re-ties only
through `get_input_embeddings()` / `get_output_embeddings()`, which the wrapper does not override:
the inner `lm_head` stays at its blank init, so every evaluation of the reloaded checkpoint reports
chance-level numbers although the trained weights were saved correctly.
Thread: https://github.com/vec2text/vec2text/pull/94
"""
import math
import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, SEQ, EMB_DIM, D = 32, 6, 48, 64
PAD = 0


# ---------------------------------------------------------------- HF-like base class stand-in
class PreTrainedModel(nn.Module):
    def get_input_embeddings(self):
        return None

    def get_output_embeddings(self):
        return None

    def tie_weights(self):
        out, inp = self.get_output_embeddings(), self.get_input_embeddings()
        if out is not None and inp is not None:
            out.weight = inp.weight

    def _tied_keys(self):
        keys = []
        for name, mod in self.named_modules():
            for k in getattr(mod, "_tied_weights_keys", []):
                keys.append(f"{name}.{k}" if name else k)
        return keys

    def save_pretrained(self, path):
        os.makedirs(path, exist_ok=True)
        sd = {k: v for k, v in self.state_dict().items() if k not in self._tied_keys()}  # shared tensor saved once
        torch.save({"config": self.config, "state_dict": sd}, os.path.join(path, "model.pt"))

    @classmethod
    def from_pretrained(cls, path):
        ckpt = torch.load(os.path.join(path, "model.pt"))
        model = cls(ckpt["config"])
        for mod in model.modules():  # like meta-device init: every parameter materialised as its own blank tensor
            for name, p in list(mod._parameters.items()):
                if p is not None:
                    mod._parameters[name] = nn.Parameter(torch.zeros(p.shape))
        res = model.load_state_dict(ckpt["state_dict"], strict=False)
        model.tie_weights()
        print(f"from_pretrained: missing keys {res.missing_keys}")
        return model


class TinyT5(PreTrainedModel):
    """T5ForConditionalGeneration call shape: (inputs_embeds, attention_mask, labels) -> loss/logits."""
    _tied_weights_keys = ["lm_head.weight"]

    def __init__(self, d=D):
        super().__init__()
        self.shared = nn.Embedding(VOCAB, d)
        self.encoder = nn.GRU(d, d, batch_first=True)
        self.decoder = nn.GRU(d, d, batch_first=True)
        self.lm_head = nn.Linear(d, VOCAB, bias=False)
        self.tie_weights()

    def get_input_embeddings(self):
        return self.shared

    def get_output_embeddings(self):
        return self.lm_head

    def forward(self, inputs_embeds, attention_mask=None, labels=None):
        _, h = self.encoder(inputs_embeds)
        dec_in = torch.cat([torch.full_like(labels[:, :1], PAD), labels[:, :-1]], 1)  # shift right
        out, _ = self.decoder(self.shared(dec_in), h)
        logits = self.lm_head(out)
        return {"loss": F.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1)), "logits": logits}


class InversionModel(PreTrainedModel):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.num_repeat_tokens = config["num_repeat_tokens"]
        self.encoder_decoder = TinyT5()
        self.embedding_transform = nn.Sequential(
            nn.Linear(config["embedder_dim"], config["embedder_dim"]), nn.GELU(),
            nn.Linear(config["embedder_dim"], D * self.num_repeat_tokens))

    def embed_and_project(self, frozen_embeddings):
        e = self.embedding_transform(frozen_embeddings)
        e = e.reshape(e.shape[0], self.num_repeat_tokens, -1)
        return e, torch.ones(e.shape[:2])

    def forward(self, frozen_embeddings, labels):
        inputs_embeds, attention_mask = self.embed_and_project(frozen_embeddings)
        return self.encoder_decoder(inputs_embeds=inputs_embeds, attention_mask=attention_mask, labels=labels)


# ---------------------------------------------------------------- data: texts and their frozen embeddings
def make_split(n, seed, embedder):
    g = torch.Generator().manual_seed(seed)
    text = torch.randint(1, VOCAB, (n, SEQ), generator=g)
    with torch.no_grad():
        frozen = embedder(text).flatten(1)  # a fixed "sentence embedder" (position-aware, frozen)
    return frozen, text


@torch.no_grad()
def evaluate(model, frozen, text):
    model.eval()
    out = model(frozen, labels=text)
    acc = (out["logits"].argmax(-1) == text).float().mean().item()
    return out["loss"].item(), acc


def main():
    torch.manual_seed(0)
    emb_table = torch.randn(VOCAB, EMB_DIM // SEQ)
    embedder = lambda t: emb_table[t]  # noqa: E731
    train_x, train_y = make_split(4096, 0, embedder)
    val_x, val_y = make_split(512, 1, embedder)

    model = InversionModel({"num_repeat_tokens": 2, "embedder_dim": EMB_DIM})
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(2)
    step = 0
    for epoch in range(5):
        model.train()
        for idx in torch.randperm(len(train_x), generator=g).split(64):
            loss = model(train_x[idx], labels=train_y[idx])["loss"]
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
        vl, va = evaluate(model, val_x, val_y)
        print(f"epoch {epoch} step {step} | train loss {loss.item():.3f} | eval loss {vl:.3f} | eval token acc {va:.3f}")

    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(d)
        reloaded = InversionModel.from_pretrained(d)
    vl2, va2 = evaluate(reloaded, val_x, val_y)
    print(f"reloaded checkpoint | eval loss {vl2:.3f} (ln V = {math.log(VOCAB):.3f}) | eval token acc {va2:.3f}")
    print("inner lm_head is shared embedding:",
          reloaded.encoder_decoder.lm_head.weight is reloaded.encoder_decoder.shared.weight)


if __name__ == "__main__":
    main()
