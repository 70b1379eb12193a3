"""GRPO-style policy training of a small causal LM in the SkyRL (skyrl-train) style: a trainer
generates groups of responses, computes group-normalised advantages, and a PolicyWorker runs
forward_backward over the micro-batches of each mini-batch, dividing each micro-batch loss by the
number of accumulation steps, then optim_step() once per mini-batch. ppo_policy_loss() reduces
with loss_reduction="token_mean" as masked_mean(loss, loss_mask) over the micro-batch it is given.
So the mini-batch loss is the mean of per-micro-batch token means, not the mean over all its
tokens: a token in a micro-batch of short responses weighs several times more than a token in a
micro-batch of long ones, and the objective depends on how the responses fall into micro-batches.

Thread: https://github.com/NovaSky-AI/SkyRL/pull/1296
"""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, EOS, PROMPT_LEN, MAX_RESPONSE, GOOD = 12, 1, 3, 12, 5


def masked_mean(x, mask):
    return (x * mask).sum() / mask.sum().clamp(min=1)


def ppo_policy_loss(log_probs, old_log_probs, advantages, loss_mask, eps_clip=0.2, loss_reduction="token_mean"):
    ratio = torch.exp(log_probs - old_log_probs)
    loss = -torch.min(ratio * advantages, ratio.clamp(1 - eps_clip, 1 + eps_clip) * advantages)
    assert loss_reduction == "token_mean"
    return masked_mean(loss, loss_mask)


class Policy(nn.Module):
    def __init__(self, dim=48):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.lm_head = nn.Linear(dim, VOCAB)

    def forward(self, input_ids):
        return self.lm_head(self.rnn(self.embed(input_ids))[0])

    def action_log_probs(self, seq):
        logits = self(seq)[:, PROMPT_LEN - 1:-1]
        return F.log_softmax(logits, -1).gather(-1, seq[:, PROMPT_LEN:, None]).squeeze(-1)


class PolicyWorker:
    def __init__(self, model, lr=2e-3, micro_train_batch_size_per_gpu=4, max_grad_norm=1.0):
        self.model, self.micro = model, micro_train_batch_size_per_gpu
        self.max_grad_norm = max_grad_norm
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr)

    def forward_backward(self, mini_batch):
        n = len(mini_batch["sequences"])
        accumulation_steps = n // self.micro
        for start in range(0, n, self.micro):
            mb = {k: v[start:start + self.micro] for k, v in mini_batch.items()}
            log_probs = self.model.action_log_probs(mb["sequences"])
            loss = ppo_policy_loss(log_probs, mb["old_log_probs"], mb["advantages"], mb["loss_mask"])
            (loss / accumulation_steps).backward()

    def optim_step(self):
        grad_norm = nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad()
        return grad_norm


class RayPPOTrainer:
    def __init__(self, prompts, n_samples_per_prompt=4, train_batch_size=8, policy_mini_batch_size=4):
        self.prompts, self.n = prompts, n_samples_per_prompt
        self.train_batch_size, self.mini = train_batch_size, policy_mini_batch_size
        self.policy = PolicyWorker(Policy())
        self.g = torch.Generator().manual_seed(1)

    @torch.no_grad()
    def generate(self, prompts):
        seq, done, mask = prompts, torch.zeros(len(prompts), dtype=torch.bool), []
        for _ in range(MAX_RESPONSE):
            probs = F.softmax(self.policy.model(seq)[:, -1], -1)
            tok = torch.multinomial(probs, 1, generator=self.g).squeeze(-1)
            tok = torch.where(done, torch.full_like(tok, EOS), tok)
            mask.append((~done).float())
            done = done | (tok == EOS)
            seq = torch.cat([seq, tok[:, None]], 1)
        return seq, torch.stack(mask, 1)

    def train(self, steps):
        for step in range(steps):
            idx = torch.randint(0, len(self.prompts), (self.train_batch_size,), generator=self.g)
            prompts = self.prompts[idx].repeat_interleave(self.n, 0)
            seq, mask = self.generate(prompts)
            resp = seq[:, PROMPT_LEN:]
            rewards = ((resp == GOOD).float() * mask).sum(1).clamp(max=3) / 3
            grouped = rewards.view(-1, self.n)
            adv = ((grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-6)).view(-1)
            with torch.no_grad():
                old_log_probs = self.policy.model.action_log_probs(seq)
            batch = {"sequences": seq, "old_log_probs": old_log_probs, "loss_mask": mask,
                     "advantages": adv[:, None].expand_as(mask).contiguous()}
            per_mini = self.mini * self.n
            for start in range(0, len(seq), per_mini):
                self.policy.forward_backward({k: v[start:start + per_mini] for k, v in batch.items()})
                grad_norm = self.policy.optim_step()
            if step % 5 == 0:
                print(f"step {step} reward {rewards.mean():.3f} mean response length {mask.sum(1).mean():.1f} "
                      f"grad_norm {grad_norm:.3f}")


def main():
    torch.manual_seed(0)
    prompts = torch.randint(2, VOCAB, (256, PROMPT_LEN), generator=torch.Generator().manual_seed(0))
    RayPPOTrainer(prompts).train(steps=35)


if __name__ == "__main__":
    main()
