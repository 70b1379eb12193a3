"""An example fine-tuning script for a GPT double-heads model on a story-cloze task: for each story
pre_process_datasets() builds two candidate inputs [start] + story + [delim] + ending + [clf], the
mc_token_ids pointing at the [clf] token and lm_labels filled with -1 except for the correct
candidate, where it writes the tokens already shifted by one (lm_labels[:len-1] = tokens[1:]). The
DoubleHeadsModel computes its own LM loss and shifts again inside forward (logits[:, :-1] against
lm_labels[:, 1:], ignore_index=-1), so the LM head is trained to predict the token two steps ahead;
the loss is lm_coef * lm_loss + mc_loss, optimised with Adam and a linear warmup.

Thread: https://github.com/huggingface/transformers/pull/562
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB, START, DELIM, CLF = 40, 37, 38, 39


def load_rocstories(n, seed):
    """Stories follow a fixed successor chain; the right ending continues it, the wrong one does not."""
    rng = np.random.default_rng(seed)
    succ = np.random.default_rng(11).permutation(36) + 1
    data = []
    for _ in range(n):
        story = [int(rng.integers(1, 37))]
        for _ in range(int(rng.integers(6, 11))):
            story.append(int(succ[story[-1] - 1]) if rng.random() < 0.85 else int(rng.integers(1, 37)))
        good = [int(succ[story[-1] - 1])]
        good.append(int(succ[good[-1] - 1]))
        bad = [int(rng.integers(1, 37)), int(rng.integers(1, 37))]
        label = int(rng.integers(0, 2))
        cont1, cont2 = (good, bad) if label == 0 else (bad, good)
        data.append((story, cont1, cont2, label))
    return data


def pre_process_datasets(dataset, input_len):
    n_batch = len(dataset)
    input_ids = np.zeros((n_batch, 2, input_len), dtype=np.int64)
    mc_token_ids = np.zeros((n_batch, 2), dtype=np.int64)
    lm_labels = np.full((n_batch, 2, input_len), fill_value=-1, dtype=np.int64)
    mc_labels = np.zeros((n_batch,), dtype=np.int64)
    for i, (story, cont1, cont2, mc_label) in enumerate(dataset):
        for j, cont in enumerate((cont1, cont2)):
            seq = [START] + story + [DELIM] + cont + [CLF]
            input_ids[i, j, :len(seq)] = seq
            mc_token_ids[i, j] = len(seq) - 1
            if j == mc_label:
                lm_labels[i, j, :len(seq) - 1] = seq[1:]
        mc_labels[i] = mc_label
    return [torch.tensor(t) for t in (input_ids, mc_token_ids, lm_labels, mc_labels)]


class DoubleHeadsModel(nn.Module):
    def __init__(self, vocab=VOCAB, dim=64, layers=2, heads=4, max_len=32):
        super().__init__()
        self.tokens_embed = nn.Embedding(vocab, dim)
        self.positions_embed = nn.Embedding(max_len, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.1, batch_first=True, norm_first=True)
        self.h = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.tokens_embed.weight
        self.multiple_choice_head = nn.Sequential(nn.Dropout(0.1), nn.Linear(dim, 1))
        nn.init.normal_(self.tokens_embed.weight, std=0.02)
        nn.init.normal_(self.positions_embed.weight, std=0.01)

    def forward(self, input_ids, mc_token_ids, lm_labels=None, mc_labels=None):
        b, c, t = input_ids.shape
        flat = input_ids.view(b * c, t)
        x = self.tokens_embed(flat) + self.positions_embed(torch.arange(t))
        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        h = self.h(x, mask=mask, is_causal=True)
        lm_logits = self.lm_head(h).view(b, c, t, -1)
        clf_h = h.view(b, c, t, -1).gather(2, mc_token_ids[:, :, None, None].expand(-1, -1, 1, h.size(-1)))
        mc_logits = self.multiple_choice_head(clf_h.squeeze(2)).squeeze(-1)
        losses = []
        if lm_labels is not None:
            shift_logits = lm_logits[..., :-1, :].contiguous()
            shift_labels = lm_labels[..., 1:].contiguous()
            losses.append(F.cross_entropy(shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1),
                                          ignore_index=-1))
        if mc_labels is not None:
            losses.append(F.cross_entropy(mc_logits, mc_labels))
        return losses if losses else (lm_logits, mc_logits)


def main():
    torch.manual_seed(0)
    train_tensors = pre_process_datasets(load_rocstories(1600, seed=0), input_len=18)
    eval_tensors = pre_process_datasets(load_rocstories(400, seed=1), input_len=18)
    train_loader = DataLoader(TensorDataset(*train_tensors), batch_size=16, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    eval_loader = DataLoader(TensorDataset(*eval_tensors), batch_size=100)
    model = DoubleHeadsModel()
    num_train_epochs, lm_coef = 2, 0.9
    total = num_train_epochs * len(train_loader)
    optimizer = torch.optim.Adam(model.parameters(), lr=6.25e-4)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min((s + 1) / (0.002 * total + 1), 1 - s / total))
    for epoch in range(num_train_epochs):
        model.train()
        for step, (input_ids, mc_token_ids, lm_labels, mc_labels) in enumerate(train_loader):
            losses = model(input_ids, mc_token_ids, lm_labels, mc_labels)
            loss = lm_coef * losses[0] + losses[1]
            loss.backward()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            if step % 25 == 0:
                print(f"epoch {epoch} step {step} lm {losses[0].item():.3f} mc {losses[1].item():.3f}")
        model.eval()
        correct = lm_total = 0.0
        with torch.no_grad():
            for input_ids, mc_token_ids, lm_labels, mc_labels in eval_loader:
                lm_loss, mc_loss = model(input_ids, mc_token_ids, lm_labels, mc_labels)
                _, mc_logits = model(input_ids, mc_token_ids)
                correct += (mc_logits.argmax(1) == mc_labels).sum().item()
                lm_total += lm_loss.item()
        print(f"epoch {epoch} eval_lm_loss {lm_total / len(eval_loader):.3f} "
              f"eval_accuracy {correct / len(eval_loader.dataset):.3f}")


if __name__ == "__main__":
    main()
