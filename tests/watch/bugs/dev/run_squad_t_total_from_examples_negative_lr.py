"""Extractive QA fine-tuning in the shape of an early run_squad.py: read_squad_examples builds
examples, convert_examples_to_features cuts each long context into windows with a doc stride (an
answer outside a window is labelled at position 0), an encoder with a span head predicts start and
end logits, and a BertAdam-style optimizer applies the warmup_linear schedule internally from `warmup` and `t_total`.
t_total is computed from the number of examples, len(train_examples) / batch_size * epochs, but the
loader iterates over features, and long contexts give more features than examples. Training runs
past t_total, where warmup_linear returns 1 - progress: the learning rate crosses zero and becomes
negative, and for the rest of training every update moves the weights uphill.

Thread: https://github.com/huggingface/transformers/issues/324
"""
import torch
from torch import nn

VOCAB, CLS, SEP, MAX_SEQ, DOC_STRIDE, Q_LEN = 64, 1, 2, 40, 16, 4


def warmup_linear(x, warmup=0.002):
    if x < warmup:
        return x / warmup
    return 1.0 - x


class BertAdam(torch.optim.Optimizer):
    def __init__(self, params, lr, warmup=-1, t_total=-1, b1=0.9, b2=0.999, e=1e-6, weight_decay=0.01):
        super().__init__(params, dict(lr=lr, warmup=warmup, t_total=t_total, b1=b1, b2=b2, e=e, weight_decay=weight_decay))

    def get_lr(self):
        group = self.param_groups[0]
        state = self.state[group["params"][0]]
        return group["lr"] * warmup_linear(state.get("step", 0) / group["t_total"], group["warmup"])

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"], state["next_m"], state["next_v"] = 0, torch.zeros_like(p), torch.zeros_like(p)
                state["next_m"].mul_(group["b1"]).add_(p.grad, alpha=1 - group["b1"])
                state["next_v"].mul_(group["b2"]).addcmul_(p.grad, p.grad, value=1 - group["b2"])
                update = state["next_m"] / (state["next_v"].sqrt() + group["e"]) + group["weight_decay"] * p
                lr_scheduled = group["lr"] * warmup_linear(state["step"] / group["t_total"], group["warmup"])
                p.add_(update, alpha=-lr_scheduled)
                state["step"] += 1


class SpanQA(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.embeddings = nn.Embedding(VOCAB, dim)
        self.encoder = nn.LSTM(dim, dim, batch_first=True, bidirectional=True)
        self.qa_outputs = nn.Linear(2 * dim, 2)

    def forward(self, input_ids, start_positions=None, end_positions=None):
        h, _ = self.encoder(self.embeddings(input_ids))
        start_logits, end_logits = self.qa_outputs(h).unbind(-1)
        if start_positions is None:
            return start_logits, end_logits
        ce = nn.CrossEntropyLoss()
        return (ce(start_logits, start_positions) + ce(end_logits, end_positions)) / 2


def read_squad_examples(n, g):
    """The answer is the 2-token span right after the cue token the question asks about (token 6)."""
    examples = []
    for _ in range(n):
        ctx_len = int(torch.randint(20, 46, (1,), generator=g))
        context = torch.randint(20, VOCAB, (ctx_len,), generator=g)
        key = int(torch.randint(3, 20, (1,), generator=g))
        start = int(torch.randint(0, ctx_len - 3, (1,), generator=g))
        context[start] = 6
        examples.append((torch.tensor([6, 3, 4, key]), context, start + 1, start + 2))
    return examples


def convert_examples_to_features(examples):
    feats, doc_len = [], MAX_SEQ - Q_LEN - 3
    for question, context, a_start, a_end in examples:
        offset = 0
        while True:
            window = context[offset: offset + doc_len]
            ids = torch.cat([torch.tensor([CLS]), question, torch.tensor([SEP]), window, torch.tensor([SEP])])
            ids = torch.cat([ids, torch.zeros(MAX_SEQ - len(ids), dtype=torch.long)])
            base = Q_LEN + 2 - offset
            inside = offset <= a_start and a_end < offset + len(window)
            feats.append((ids, base + a_start if inside else 0, base + a_end if inside else 0))
            if offset + doc_len >= len(context):
                break
            offset += DOC_STRIDE
    return feats


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    train_batch_size, num_train_epochs, learning_rate, warmup_proportion = 16, 2, 3e-3, 0.1
    train_examples = read_squad_examples(560, g)
    num_train_optimization_steps = int(len(train_examples) / train_batch_size) * num_train_epochs
    train_features = convert_examples_to_features(train_examples)
    print(f"{len(train_examples)} examples, {len(train_features)} features, t_total {num_train_optimization_steps}")
    ids = torch.stack([f[0] for f in train_features])
    starts, ends = torch.tensor([f[1] for f in train_features]), torch.tensor([f[2] for f in train_features])
    model = SpanQA()
    optimizer = BertAdam(model.parameters(), lr=learning_rate, warmup=warmup_proportion,
                         t_total=num_train_optimization_steps)
    global_step = 0
    for epoch in range(num_train_epochs):
        model.train()
        for idx in torch.randperm(len(ids), generator=g).split(train_batch_size):
            loss = model(ids[idx], starts[idx], ends[idx])
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            global_step += 1
            if global_step % 10 == 0:
                print(f"step {global_step} loss {loss.item():.4f} lr {optimizer.get_lr():.2e}")
    model.eval()
    dev = convert_examples_to_features(read_squad_examples(150, g))
    with torch.no_grad():
        s, e = model(torch.stack([f[0] for f in dev]))
    hit = (s.argmax(-1) == torch.tensor([f[1] for f in dev])) & (e.argmax(-1) == torch.tensor([f[2] for f in dev]))
    print(f"dev exact match over features {hit.float().mean().item():.3f}")


if __name__ == "__main__":
    main()
