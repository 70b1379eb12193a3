"""A run_openai_gpt.py-style fine-tuning script for the ROCStories cloze task: a main() that
builds a small OpenAIGPTDoubleHeadsModel stand-in (a causal transformer with a language-model
head and a multiple-choice head read at the _classify_ token of each of the two candidate
endings), encodes every story as [_start_ story _delimiter_ ending _classify_] for both endings,
wraps the tensors (input_ids, mc_token_ids, lm_labels, mc_labels) in TensorDatasets and
DataLoaders, builds an OpenAIAdam stand-in (Adam with a warmup_linear schedule over t_total,
per-parameter gradient clipping and decoupled weight decay) over no_decay parameter groups, then
trains with loss = lm_coef * lm_loss + mc_loss, loss.backward(), optimizer.step() and finally
reports eval accuracy of the multiple-choice head. The bug: the training loop never calls
optimizer.zero_grad(), so .grad keeps the running sum of every batch's gradient since the start
and each step applies that ever-growing sum (momentum that never decays); the run finishes
without an error but the model barely beats chance on the held-out stories.

Thread: https://github.com/huggingface/transformers/issues/340
"""
import math
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, RandomSampler, SequentialSampler, TensorDataset


class OpenAIGPTDoubleHeadsModel(nn.Module):
    def __init__(self, vocab_size, n_positions, n_embd=64, n_layer=2, n_head=4):
        super().__init__()
        self.tokens_embed = nn.Embedding(vocab_size, n_embd)
        self.positions_embed = nn.Embedding(n_positions, n_embd)
        layer = nn.TransformerEncoderLayer(n_embd, n_head, 4 * n_embd, dropout=0.1, batch_first=True,
                                           activation="gelu")
        self.h = nn.TransformerEncoder(layer, n_layer, enable_nested_tensor=False)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.lm_head.weight = self.tokens_embed.weight
        self.multiple_choice_head = nn.Sequential(nn.Dropout(0.1), nn.Linear(n_embd, 1))
        for emb in (self.tokens_embed, self.positions_embed):
            nn.init.normal_(emb.weight, std=0.02)
        self.register_buffer("causal", torch.triu(torch.full((n_positions, n_positions), float("-inf")), 1))

    def forward(self, input_ids, mc_token_ids, lm_labels=None, mc_labels=None):
        b, c, t = input_ids.shape
        ids = input_ids.view(b * c, t)
        h = self.tokens_embed(ids) + self.positions_embed(torch.arange(t))
        h = self.h(h, mask=self.causal[:t, :t])
        lm_logits = self.lm_head(h).view(b, c, t, -1)
        cls_h = h.view(b, c, t, -1)[torch.arange(b)[:, None], torch.arange(c)[None, :], mc_token_ids]
        mc_logits = self.multiple_choice_head(cls_h).squeeze(-1)
        if lm_labels is None:
            return lm_logits, mc_logits
        lm_loss = F.cross_entropy(lm_logits[..., :-1, :].reshape(-1, lm_logits.size(-1)),
                                  lm_labels[..., 1:].reshape(-1), ignore_index=-1)
        mc_loss = F.cross_entropy(mc_logits, mc_labels)
        return lm_loss, mc_loss


def warmup_linear(x, warmup=0.002):
    return x / warmup if x < warmup else max(1.0 - x, 0.0)


class OpenAIAdam(torch.optim.Optimizer):
    """Adam with the warmup_linear schedule, per-parameter grad clipping and decoupled decay."""

    def __init__(self, params, lr, warmup=0.002, t_total=-1, b1=0.9, b2=0.999, e=1e-8,
                 weight_decay=0.0, max_grad_norm=1.0):
        defaults = dict(lr=lr, warmup=warmup, t_total=t_total, b1=b1, b2=b2, e=e,
                        weight_decay=weight_decay, max_grad_norm=max_grad_norm)
        super().__init__(params, defaults)

    def get_lr(self):
        lrs = []
        for group in self.param_groups:
            for p in group["params"]:
                st = self.state[p]
                if not st:
                    return [0.0]
                lrs.append(group["lr"] * warmup_linear(st["step"] / group["t_total"], group["warmup"]))
        return lrs

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                st = self.state[p]
                if not st:
                    st["step"] = 0
                    st["exp_avg"] = torch.zeros_like(p)
                    st["exp_avg_sq"] = torch.zeros_like(p)
                if group["max_grad_norm"] > 0:
                    torch.nn.utils.clip_grad_norm_(p, group["max_grad_norm"])
                st["step"] += 1
                st["exp_avg"].mul_(group["b1"]).add_(grad, alpha=1 - group["b1"])
                st["exp_avg_sq"].mul_(group["b2"]).addcmul_(grad, grad, value=1 - group["b2"])
                bc1 = 1 - group["b1"] ** st["step"]
                bc2 = 1 - group["b2"] ** st["step"]
                lr = group["lr"] * warmup_linear(st["step"] / group["t_total"], group["warmup"])
                step_size = lr * math.sqrt(bc2) / bc1
                p.addcdiv_(st["exp_avg"], st["exp_avg_sq"].sqrt().add_(group["e"]), value=-step_size)
                if group["weight_decay"] > 0 and p.dim() > 1:
                    p.add_(p, alpha=-lr * group["weight_decay"])


def make_rocstories(n, gen, vocab=60, story_len=12):
    """Synthetic cloze stories: every story leans to one of two registers (tokens 0-29 or 30-59,
    mixed 75/25); the right ending leans the same way, the wrong one leans the other way (65/35),
    so the head has to weigh noisy evidence from story and ending together."""
    data = []
    half = vocab // 2

    def draw(topic, k, p):
        own = torch.rand(k, generator=gen) < p
        t = torch.where(own, torch.tensor(topic), torch.tensor(1 - topic))
        return (t * half + torch.randint(0, half, (k,), generator=gen)).tolist()

    for _ in range(n):
        topic = int(torch.randint(0, 2, (1,), generator=gen))
        story = draw(topic, story_len, 0.75)
        good, bad = draw(topic, 5, 0.65), draw(1 - topic, 5, 0.65)
        label = int(torch.randint(0, 2, (1,), generator=gen))
        cont1, cont2 = (good, bad) if label == 0 else (bad, good)
        data.append((story, cont1, cont2, label))
    return data


def pre_process_dataset(dataset, input_len, start, delim, clf):
    n = len(dataset)
    input_ids = np.zeros((n, 2, input_len), dtype=np.int64)
    mc_token_ids = np.zeros((n, 2), dtype=np.int64)
    lm_labels = np.full((n, 2, input_len), fill_value=-1, dtype=np.int64)
    mc_labels = np.zeros((n,), dtype=np.int64)
    for i, (story, cont1, cont2, mc_label) in enumerate(dataset):
        for j, cont in enumerate((cont1, cont2)):
            seq = [start] + story + [delim] + cont + [clf]
            input_ids[i, j, :len(seq)] = seq
            lm_labels[i, j, :len(seq)] = seq
            mc_token_ids[i, j] = len(seq) - 1
        mc_labels[i] = mc_label
    return tuple(torch.tensor(t) for t in (input_ids, mc_token_ids, lm_labels, mc_labels))


def main():
    args = SimpleNamespace(seed=42, num_train_epochs=4, train_batch_size=16, eval_batch_size=32,
                           learning_rate=5e-3, warmup_proportion=0.002, max_grad_norm=1,
                           weight_decay=0.01, lm_coef=0.5)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)

    special = {"_start_": 60, "_delimiter_": 61, "_classify_": 62}
    vocab_size, input_len = 63, 12 + 5 + 3
    model = OpenAIGPTDoubleHeadsModel(vocab_size, input_len)

    train_tensors = pre_process_dataset(make_rocstories(800, gen), input_len, *special.values())
    eval_tensors = pre_process_dataset(make_rocstories(300, gen), input_len, *special.values())
    train_data = TensorDataset(*train_tensors)
    train_dataloader = DataLoader(train_data, sampler=RandomSampler(train_data, generator=gen),
                                  batch_size=args.train_batch_size)
    eval_data = TensorDataset(*eval_tensors)
    eval_dataloader = DataLoader(eval_data, sampler=SequentialSampler(eval_data), batch_size=args.eval_batch_size)

    param_optimizer = list(model.named_parameters())
    no_decay = ["bias", "norm"]
    optimizer_grouped_parameters = [
        {"params": [p for n, p in param_optimizer if not any(nd in n for nd in no_decay)], "weight_decay": 0.01},
        {"params": [p for n, p in param_optimizer if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
    ]
    num_train_optimization_steps = len(train_dataloader) * args.num_train_epochs
    optimizer = OpenAIAdam(optimizer_grouped_parameters, lr=args.learning_rate, warmup=args.warmup_proportion,
                           max_grad_norm=args.max_grad_norm, weight_decay=args.weight_decay,
                           t_total=num_train_optimization_steps)

    nb_tr_steps, tr_loss = 0, 0
    model.train()
    for epoch in range(args.num_train_epochs):
        tr_loss, nb_tr_steps = 0, 0
        for step, batch in enumerate(train_dataloader):
            input_ids, mc_token_ids, lm_labels, mc_labels = batch
            losses = model(input_ids, mc_token_ids, lm_labels, mc_labels)
            loss = args.lm_coef * losses[0] + losses[1]
            loss.backward()
            optimizer.step()
            tr_loss += loss.item()
            nb_tr_steps += 1
        print(f"epoch {epoch}: {nb_tr_steps} steps, mean training loss {tr_loss / nb_tr_steps:.4f}, "
              f"lr {optimizer.get_lr()[0]:.2e}")

    model.eval()
    eval_loss, eval_accuracy, nb_eval_steps, nb_eval_examples = 0, 0, 0, 0
    for input_ids, mc_token_ids, lm_labels, mc_labels in eval_dataloader:
        with torch.no_grad():
            _, mc_loss = model(input_ids, mc_token_ids, lm_labels, mc_labels)
            _, mc_logits = model(input_ids, mc_token_ids)
        eval_accuracy += (mc_logits.argmax(1) == mc_labels).sum().item()
        eval_loss += mc_loss.item()
        nb_eval_steps += 1
        nb_eval_examples += input_ids.size(0)
    print(f"eval_loss = {eval_loss / nb_eval_steps:.4f}")
    print(f"eval_accuracy = {eval_accuracy / nb_eval_examples:.4f}")
    print(f"train_loss = {tr_loss / nb_tr_steps:.4f}")


if __name__ == "__main__":
    main()
