"""LoRA fine-tuning of a decoder for sequence classification, PEFT style: a small pretrained
causal transformer (token + position embeddings, pre-norm blocks with q_proj/k_proj/v_proj/o_proj
and an MLP) gets a freshly initialised `score` head on the last non-pad token; a LoraConfig-like
dict with target_modules and modules_to_save is handed to get_peft_model(), which freezes the base,
wraps every targeted Linear in a LoRA layer (frozen base weight + trainable A/B) and gives every
module in modules_to_save a trainable copy; a train loop with AdamW follows,
then save_pretrained() writes the adapter (LoRA tensors + modules_to_save copies) and an inference
script rebuilds the classifier from the base checkpoint (a new random `score`, as
from_pretrained(num_labels=...) would) and loads the adapter into it.
The bug: the config is built with `modules_to_save=lora_target_modules.append("score")`.
list.append returns None, so modules_to_save is None, and "score" is appended to target_modules
instead: the random head is frozen and only gets a rank-r update, and its base weight is never
written to the adapter, so the reloaded classifier has a different random head and scores near
chance although training accuracy looked fine.

Thread: https://github.com/huggingface/peft/issues/577
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

VOCAB, PAD, DIM, SEQ, NUM_LABELS = 40, 0, 32, 12, 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.q_proj, self.k_proj = nn.Linear(DIM, DIM), nn.Linear(DIM, DIM)
        self.v_proj, self.o_proj = nn.Linear(DIM, DIM), nn.Linear(DIM, DIM)
        self.up_proj, self.down_proj = nn.Linear(DIM, 2 * DIM), nn.Linear(2 * DIM, DIM)

    def forward(self, x, key_mask):
        h = self.ln1(x)
        q, k, v = self.q_proj(h), self.k_proj(h), self.v_proj(h)
        att = q @ k.transpose(1, 2) / math.sqrt(DIM)
        causal = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).tril()
        att = att.masked_fill(~(causal & key_mask[:, None, :]), -1e9).softmax(-1)
        x = x + self.o_proj(att @ v)
        return x + self.down_proj(F.gelu(self.up_proj(self.ln2(x))))


class DecoderForSequenceClassification(nn.Module):
    def __init__(self, num_labels):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Embedding(SEQ, DIM)
        self.layers = nn.ModuleList([Block() for _ in range(2)])
        self.norm = nn.LayerNorm(DIM)
        self.score = nn.Linear(DIM, num_labels, bias=False)

    def forward(self, input_ids):
        mask = input_ids != PAD
        x = self.embed(input_ids) + self.pos(torch.arange(input_ids.shape[1]))
        for layer in self.layers:
            x = layer(x, mask)
        last = (torch.arange(input_ids.shape[1]) * mask).argmax(-1)
        return self.score(self.norm(x)[torch.arange(len(x)), last])


def from_pretrained(base_state, num_labels, seed):
    """Base weights from the checkpoint; the classification head is newly initialised."""
    torch.manual_seed(seed)
    model = DecoderForSequenceClassification(num_labels)
    missing = model.load_state_dict(base_state, strict=False).missing_keys
    assert missing == ["score.weight"], missing
    return model


class LoraLinear(nn.Module):
    def __init__(self, base, r, alpha):
        super().__init__()
        self.base_layer = base
        self.lora_A = nn.Parameter(torch.randn(r, base.in_features) / math.sqrt(base.in_features))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r))
        self.scaling = alpha / r

    def forward(self, x):
        return self.base_layer(x) + (x @ self.lora_A.t() @ self.lora_B.t()) * self.scaling


class ModulesToSaveWrapper(nn.Module):
    def __init__(self, module):
        super().__init__()
        self.original_module = module
        self.modules_to_save = nn.Linear(module.in_features, module.out_features, bias=module.bias is not None)
        self.modules_to_save.load_state_dict(module.state_dict())

    def forward(self, x):
        return self.modules_to_save(x)


def get_peft_model(model, config):
    for p in model.parameters():
        p.requires_grad = False
    targets, to_save = config["target_modules"], config["modules_to_save"] or []
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if child_name in to_save:
                setattr(module, child_name, ModulesToSaveWrapper(child))
            elif child_name in targets and isinstance(child, nn.Linear):
                setattr(module, child_name, LoraLinear(child, config["r"], config["lora_alpha"]))
    return model


def save_pretrained(peft_model):
    return {k: v.detach().clone() for k, v in peft_model.state_dict().items()
            if "lora_" in k or ".modules_to_save." in k}


def print_trainable_parameters(model):
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    print(f"trainable params: {trainable} || all params: {total} || trainable%: {100 * trainable / total:.2f}")


def make_data(n, seed):
    """Label = which of four marker tokens occurs most often; variable lengths, right padding."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.full((n, SEQ), PAD)
    labels = torch.randint(0, NUM_LABELS, (n,), generator=g)
    for i in range(n):
        length = int(torch.randint(6, SEQ + 1, (1,), generator=g))
        row = torch.randint(5, VOCAB, (length,), generator=g)
        pos = torch.randperm(length, generator=g)[:3]
        row[pos] = 1 + labels[i]
        ids[i, :length] = row
    return ids, labels


def pretrain_base(seed=0):
    """Stand-in for the pretrained checkpoint: a decoder trained on a related 4-way task."""
    torch.manual_seed(seed)
    model = DecoderForSequenceClassification(NUM_LABELS)
    ids, labels = make_data(512, seed=100)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for step in range(40):
        idx = torch.randint(0, len(ids), (32,))
        loss = F.cross_entropy(model(ids[idx]), labels[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {k: v for k, v in model.state_dict().items() if not k.startswith("score.")}


@torch.no_grad()
def accuracy(model, ids, labels):
    model.eval()
    acc = (model(ids).argmax(-1) == labels).float().mean().item()
    model.train()
    return acc


def main():
    base_state = pretrain_base()
    lora_target_modules = ["q_proj", "v_proj"]
    config = dict(r=2, lora_alpha=4, target_modules=lora_target_modules,
                  modules_to_save=lora_target_modules.append("score"))
    model = get_peft_model(from_pretrained(base_state, NUM_LABELS, seed=1), config)
    print_trainable_parameters(model)

    train_ids, train_labels = make_data(640, seed=1)
    test_ids, test_labels = make_data(256, seed=2)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    steps = 80
    g = torch.Generator().manual_seed(3)
    for step in range(steps):
        idx = torch.randint(0, len(train_ids), (32,), generator=g)
        loss = F.cross_entropy(model(train_ids[idx]), train_labels[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    print(f"after training: test accuracy {accuracy(model, test_ids, test_labels):.3f}")

    adapter = save_pretrained(model)
    reloaded = get_peft_model(from_pretrained(base_state, NUM_LABELS, seed=2), config)
    reloaded.load_state_dict(adapter, strict=False)
    print(f"reloaded from adapter: test accuracy {accuracy(reloaded, test_ids, test_labels):.3f}")


if __name__ == "__main__":
    main()
