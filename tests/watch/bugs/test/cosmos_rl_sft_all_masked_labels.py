"""A supervised fine-tuning trainer: the collate function masks prompt and padding positions with
-100 and truncates prompt + response from the right to max_len, batches are bucketed by length,
and SFTTrainer.compute_loss() returns F.cross_entropy(..., ignore_index=-100) with the default mean
reduction. In the long-prompt bucket the truncation removes every response token, so whole batches
have no label at all: their loss is 0/0 = NaN with an all-zero gradient, and the logged running loss
turns to NaN while those steps teach the model nothing.

Thread: https://github.com/nvidia-cosmos/cosmos-rl/pull/155
"""
import torch
import torch.nn.functional as F
from torch import nn


class SFTDataCollator:
    def __init__(self, pad_id, max_len):
        self.pad_id, self.max_len = pad_id, max_len

    def __call__(self, samples):
        input_ids, labels = [], []
        for prompt, response in samples:
            ids = (prompt + response)[:self.max_len]
            lab = ([-100] * len(prompt) + response)[:self.max_len]
            pad = self.max_len - len(ids)
            input_ids.append(ids + [self.pad_id] * pad)
            labels.append(lab + [-100] * pad)
        return torch.tensor(input_ids), torch.tensor(labels)


class TinyCausalLM(nn.Module):
    def __init__(self, vocab=40, dim=64):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, vocab)

    def forward(self, input_ids):
        h, _ = self.rnn(self.emb(input_ids))
        return self.head(h)


class SFTTrainer:
    def __init__(self, model, optimizer, batches, log_every=10):
        self.model, self.optimizer, self.batches, self.log_every = model, optimizer, batches, log_every

    def compute_loss(self, input_ids, labels):
        logits = self.model(input_ids)
        shift_logits, shift_labels = logits[:, :-1], labels[:, 1:]
        return F.cross_entropy(shift_logits.reshape(-1, shift_logits.size(-1)), shift_labels.reshape(-1),
                               ignore_index=-100)

    def train(self, epochs):
        step, running = 0, []
        for epoch in range(epochs):
            self.model.train()
            for input_ids, labels in self.batches:
                loss = self.compute_loss(input_ids, labels)
                self.optimizer.zero_grad()
                loss.backward()
                grad_norm = nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.optimizer.step()
                running.append(loss.item())
                step += 1
                if step % self.log_every == 0:
                    print(f"epoch {epoch} step {step} mean loss {sum(running) / len(running):.4f} "
                          f"last grad norm {grad_norm.item():.3f}")
                    running = []


def sft_samples(n, seed, vocab=40):
    """Prompts of varying length; the response spells the prompt's first three tokens reversed."""
    g = torch.Generator().manual_seed(seed)
    samples = []
    for _ in range(n):
        plen = int(torch.randint(4, 12, (1,), generator=g)) if torch.rand(1, generator=g) < 0.7 \
            else int(torch.randint(26, 34, (1,), generator=g))
        prompt = [1] + torch.randint(3, vocab, (plen,), generator=g).tolist() + [2]
        response = prompt[1:4][::-1] + [2]
        samples.append((prompt, response))
    return samples


def main():
    torch.manual_seed(0)
    collate = SFTDataCollator(pad_id=0, max_len=24)
    samples = sorted(sft_samples(640, seed=0), key=lambda s: len(s[0]))   # length-bucketed batches
    batches = [collate(samples[i:i + 16]) for i in range(0, len(samples), 16)]
    order = torch.randperm(len(batches), generator=torch.Generator().manual_seed(1)).tolist()
    batches = [batches[i] for i in order]
    model = TinyCausalLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    SFTTrainer(model, optimizer, batches).train(epochs=2)


if __name__ == "__main__":
    main()
