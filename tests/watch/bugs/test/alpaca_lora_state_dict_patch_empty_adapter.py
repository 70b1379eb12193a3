"""An Alpaca-style LoRA fine-tuning script: finetune() loads a base causal LM, wraps its q/v
projections with a PEFT-style LoRA (parameters named ...lora_A.default / ...lora_B.default),
trains with a Trainer-like loop, then, as the script does, rebinds model.state_dict to return
get_peft_model_state_dict(self, old_state_dict()) before calling model.save_pretrained(). The
newer save_pretrained() itself calls get_peft_model_state_dict on self.state_dict(), so the adapter
filter runs twice; after the first pass the keys no longer contain the adapter name, the second
pass keeps nothing, and the saved adapter is empty. generate.py loads that adapter onto the base
model without complaint and serves the untuned base model.

Thread: https://github.com/tloen/alpaca-lora/issues/539
"""
import io

import torch
import torch.nn.functional as F
from torch import nn


class LoraLinear(nn.Module):
    def __init__(self, base, r=8, alpha=16, adapter_name="default"):
        super().__init__()
        self.base_layer = base
        self.lora_A = nn.ModuleDict({adapter_name: nn.Linear(base.in_features, r, bias=False)})
        self.lora_B = nn.ModuleDict({adapter_name: nn.Linear(r, base.out_features, bias=False)})
        nn.init.zeros_(self.lora_B[adapter_name].weight)
        self.scaling, self.adapter_name = alpha / r, adapter_name

    def forward(self, x):
        a, b = self.lora_A[self.adapter_name], self.lora_B[self.adapter_name]
        return self.base_layer(x) + b(a(x)) * self.scaling


class TinyLlama(nn.Module):
    def __init__(self, vocab=40, dim=64):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, dim)
        self.q_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)
        self.lm_head = nn.Linear(dim, vocab)

    def forward(self, input_ids):
        h = self.embed_tokens(input_ids)
        h = h + torch.tanh(self.v_proj(torch.tanh(self.q_proj(h))))
        return self.lm_head(h)


def get_peft_model_state_dict(model, state_dict=None, adapter_name="default"):
    state_dict = model.state_dict() if state_dict is None else state_dict
    to_return = {k: v for k, v in state_dict.items() if "lora_" in k and adapter_name in k}
    return {k.replace(f".{adapter_name}", ""): v for k, v in to_return.items()}


def set_peft_model_state_dict(model, peft_state_dict, adapter_name="default"):
    renamed = {k.replace("lora_A.", f"lora_A.{adapter_name}.").replace("lora_B.", f"lora_B.{adapter_name}."): v
               for k, v in peft_state_dict.items()}
    return model.load_state_dict(renamed, strict=False)


class PeftModel(nn.Module):
    def __init__(self, model, target_modules=("q_proj", "v_proj")):
        super().__init__()
        self.base_model = model
        for p in model.parameters():
            p.requires_grad_(False)
        for name in target_modules:
            setattr(model, name, LoraLinear(getattr(model, name)))

    def forward(self, input_ids):
        return self.base_model(input_ids)

    def save_pretrained(self, f):
        torch.save(get_peft_model_state_dict(self, state_dict=self.state_dict()), f)


def load_base_model():
    torch.manual_seed(0)
    return TinyLlama()


def make_batches(n_batches, seed, vocab=40):
    g = torch.Generator().manual_seed(seed)
    for _ in range(n_batches):
        start = torch.randint(0, vocab, (32, 1), generator=g)
        yield (start + 7 * torch.arange(13)) % vocab


def lm_loss(model, batch):
    logits = model(batch[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1))


def finetune(output):
    model = PeftModel(load_base_model())
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=1e-2)
    for step, batch in enumerate(make_batches(120, seed=1)):
        loss = lm_loss(model, batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.4f}")

    old_state_dict = model.state_dict
    model.state_dict = (lambda self, *_, **__: get_peft_model_state_dict(self, old_state_dict())).__get__(
        model, type(model))
    model.save_pretrained(output)
    with torch.no_grad():
        return sum(lm_loss(model, b).item() for b in make_batches(5, seed=2)) / 5


def generate_eval(adapter_file):
    model = PeftModel(load_base_model())
    adapters_weights = torch.load(adapter_file)
    set_peft_model_state_dict(model, adapters_weights)
    with torch.no_grad():
        return sum(lm_loss(model, b).item() for b in make_batches(5, seed=2)) / 5, len(adapters_weights)


def main():
    buffer = io.BytesIO()
    trained_loss = finetune(buffer)
    buffer.seek(0)
    served_loss, n_tensors = generate_eval(buffer)
    print(f"held-out loss at the end of training {trained_loss:.4f}; "
          f"after reloading the saved adapter ({n_tensors} tensors) {served_loss:.4f}")


if __name__ == "__main__":
    main()
