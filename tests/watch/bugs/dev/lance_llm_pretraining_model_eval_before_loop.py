"""A notebook-style recipe that pretrains a GPT-2 model from scratch on a tokenized corpus stored as
one token per row: LanceDataset returns a block_size window starting at idx as both input_ids and
labels (the Hugging Face-style causal-LM model shifts them inside and returns outputs.loss),
LanceSampler yields shuffled start indices block_size apart, and a plain loop over epochs runs
zero_grad / forward / backward / AdamW step and prints the training perplexity per epoch. Right
before the loop the model is switched with model.eval() instead of model.train(), so the whole run
trains with GPT-2's embedding, attention and residual dropout disabled.

Thread: https://github.com/lancedb/lance-deeplearning-recipes/pull/8
"""
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset, Sampler

VOCAB = 96


def make_token_table(n_tokens, seed=0):
    """A tokenized 'corpus': a noisy first-order Markov stream over VOCAB ids."""
    g = torch.Generator().manual_seed(seed)
    table = torch.randperm(VOCAB, generator=torch.Generator().manual_seed(5))
    toks = [1, 2]
    for _ in range(n_tokens - 2):
        if torch.rand(1, generator=g) < 0.15:
            toks.append(int(torch.randint(VOCAB, (1,), generator=g)))
        else:
            toks.append(int(table[toks[-1]]))
    return np.array(toks, dtype=np.int64)


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(cfg.n_embd), nn.LayerNorm(cfg.n_embd)
        self.attn = nn.MultiheadAttention(cfg.n_embd, cfg.n_head, dropout=cfg.attn_pdrop, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(cfg.n_embd, 4 * cfg.n_embd), nn.GELU(),
                                 nn.Linear(4 * cfg.n_embd, cfg.n_embd), nn.Dropout(cfg.resid_pdrop))
        self.resid_dropout = nn.Dropout(cfg.resid_pdrop)

    def forward(self, x, mask):
        h = self.ln_1(x)
        x = x + self.resid_dropout(self.attn(h, h, h, attn_mask=mask, need_weights=False)[0])
        return x + self.mlp(self.ln_2(x))


class GPT2LMHeadModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(cfg.vocab_size, cfg.n_embd), nn.Embedding(cfg.n_positions, cfg.n_embd)
        self.drop = nn.Dropout(cfg.embd_pdrop)
        self.h = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
                if getattr(m, "bias", None) is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, input_ids, labels=None):
        t = input_ids.size(1)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        x = self.drop(self.wte(input_ids) + self.wpe(torch.arange(t)))
        for block in self.h:
            x = block(x, mask)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1))
        return SimpleNamespace(loss=loss, logits=logits)


class LanceDataset(Dataset):
    def __init__(self, tokens, block_size):
        self.tokens, self.block_size = tokens, block_size
        self.length = len(tokens) - block_size

    def __len__(self):
        return self.length

    def __getitem__(self, idx):
        sample = torch.from_numpy(self.tokens[idx: idx + self.block_size])
        return {"input_ids": sample, "labels": sample.clone()}


class LanceSampler(Sampler):
    def __init__(self, data_source, block_size):
        self.available_indices = list(range(0, len(data_source), block_size))
        np.random.shuffle(self.available_indices)

    def __iter__(self):
        yield from self.available_indices

    def __len__(self):
        return len(self.available_indices)


def main():
    np.random.seed(0)
    torch.manual_seed(0)
    lr, nb_epochs, block_size, batch_size = 1e-3, 2, 32, 8
    cfg = SimpleNamespace(vocab_size=VOCAB, n_positions=block_size, n_embd=64, n_layer=2, n_head=4,
                          embd_pdrop=0.1, attn_pdrop=0.1, resid_pdrop=0.1)
    model = GPT2LMHeadModel(cfg)
    dataset = LanceDataset(make_token_table(40 * batch_size * block_size + block_size), block_size)
    sampler = LanceSampler(dataset, block_size)
    dataloader = DataLoader(dataset, shuffle=False, batch_size=batch_size, sampler=sampler)

    model.eval()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    for epoch in range(nb_epochs):
        print(f"========= Epoch: {epoch + 1} / {nb_epochs} =========")
        epoch_loss = []
        for step, batch in enumerate(dataloader):
            optimizer.zero_grad(set_to_none=True)
            outputs = model(**batch)
            loss = outputs.loss
            loss.backward()
            optimizer.step()
            epoch_loss.append(loss.item())
            if step % 10 == 0:
                print(f"step {step} loss: {loss.item():.4f}")
        print(f"train_perplexity: {np.exp(np.mean(epoch_loss)):.3f}")


if __name__ == "__main__":
    main()
