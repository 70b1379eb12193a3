"""Classic PPO with a separate value model (GAE advantages) for a small causal LM, in the verl style:
an actor worker and a critic worker each split every mini-batch of rollouts into micro-batches,
call backward on each micro-batch loss and step their optimizer once per mini-batch. Both losses
go through agg_loss(loss_mat, loss_mask, "token-mean", batch_num_tokens=...). The actor passes the
token count of the whole mini-batch, so its micro-batch losses add up to the mini-batch token mean.
The critic's value_loss() does not forward that count, so agg_loss falls back to each micro-batch's
own token count: every micro-batch contributes a full mean and the accumulated critic gradient is
the number of micro-batches (4 here) times too large, a critic learning rate that depends on how
the mini-batch is split.

Thread: https://github.com/verl-project/verl/pull/6957
"""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, EOS, PROMPT_LEN, MAX_RESPONSE, TARGET = 12, 1, 4, 8, 7


def agg_loss(loss_mat, loss_mask, loss_agg_mode="token-mean", batch_num_tokens=None):
    assert loss_agg_mode == "token-mean"
    if batch_num_tokens is None:
        batch_num_tokens = loss_mask.sum()
    return (loss_mat * loss_mask).sum() / batch_num_tokens


class TinyLM(nn.Module):
    def __init__(self, out_dim, dim=48):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, out_dim)

    def forward(self, input_ids):
        return self.head(self.rnn(self.embed(input_ids))[0])


class DataParallelPPOActor:
    def __init__(self, model, lr=3e-3, micro_batch_size=8, clip_ratio=0.2):
        self.model, self.micro_batch_size, self.clip_ratio = model, micro_batch_size, clip_ratio
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr)

    def log_probs(self, seq):
        logits = self.model(seq)[:, PROMPT_LEN - 1:-1]
        return F.log_softmax(logits, -1).gather(-1, seq[:, PROMPT_LEN:, None]).squeeze(-1)

    def update_policy(self, mini_batch):
        batch_num_tokens = mini_batch["response_mask"].sum()
        self.optimizer.zero_grad()
        for start in range(0, len(mini_batch["seq"]), self.micro_batch_size):
            mb = {k: v[start:start + self.micro_batch_size] for k, v in mini_batch.items()}
            ratio = torch.exp(self.log_probs(mb["seq"]) - mb["old_log_probs"])
            pg = torch.max(-mb["advantages"] * ratio,
                           -mb["advantages"] * ratio.clamp(1 - self.clip_ratio, 1 + self.clip_ratio))
            agg_loss(pg, mb["response_mask"], "token-mean", batch_num_tokens=batch_num_tokens).backward()
        grad_norm = nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        return grad_norm


def value_loss(vpreds, returns, values, response_mask, cliprange_value=0.5):
    clipped = values + (vpreds - values).clamp(-cliprange_value, cliprange_value)
    loss_mat = 0.5 * torch.max((vpreds - returns) ** 2, (clipped - returns) ** 2)
    return agg_loss(loss_mat, response_mask, "token-mean")


class DataParallelPPOCritic:
    def __init__(self, model, lr=1e-3, micro_batch_size=8):
        self.model, self.micro_batch_size = model, micro_batch_size
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr)

    def compute_values(self, seq):
        return self.model(seq).squeeze(-1)[:, PROMPT_LEN - 1:-1]

    def update_critic(self, mini_batch):
        self.optimizer.zero_grad()
        total = 0.0
        for start in range(0, len(mini_batch["seq"]), self.micro_batch_size):
            mb = {k: v[start:start + self.micro_batch_size] for k, v in mini_batch.items()}
            loss = value_loss(self.compute_values(mb["seq"]), mb["returns"], mb["values"], mb["response_mask"])
            loss.backward()
            total += loss.item()
        grad_norm = nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        return total, grad_norm


class RayPPOTrainer:
    def __init__(self, prompts, train_batch_size=64, ppo_mini_batch_size=32, gamma=1.0, lam=0.95):
        self.prompts, self.train_batch_size, self.ppo_mini_batch_size = prompts, train_batch_size, ppo_mini_batch_size
        self.gamma, self.lam = gamma, lam
        self.actor = DataParallelPPOActor(TinyLM(VOCAB))
        self.critic = DataParallelPPOCritic(TinyLM(1))
        self.g = torch.Generator().manual_seed(1)

    @torch.no_grad()
    def generate_sequences(self, prompts):
        seq, done = prompts, torch.zeros(len(prompts), dtype=torch.bool)
        mask = []
        for _ in range(MAX_RESPONSE):
            probs = F.softmax(self.actor.model(seq)[:, -1], -1)
            tok = torch.multinomial(probs, 1, generator=self.g).squeeze(-1)
            tok = torch.where(done, torch.full_like(tok, EOS), tok)
            mask.append((~done).float())
            done = done | (tok == EOS)
            seq = torch.cat([seq, tok[:, None]], 1)
        return seq, torch.stack(mask, 1)

    @torch.no_grad()
    def compute_advantage(self, batch):
        resp, mask = batch["seq"][:, PROMPT_LEN:], batch["response_mask"]
        score = ((resp == TARGET).float() * mask).sum(1) / mask.sum(1)
        last = mask.sum(1).long() - 1
        rewards = torch.zeros_like(mask)
        rewards[torch.arange(len(mask)), last] = score
        values, adv, gae = batch["values"] * mask, torch.zeros_like(mask), torch.zeros(len(mask))
        for t in reversed(range(MAX_RESPONSE)):
            next_v = values[:, t + 1] if t + 1 < MAX_RESPONSE else torch.zeros(len(mask))
            gae = rewards[:, t] + self.gamma * next_v - values[:, t] + self.gamma * self.lam * gae
            adv[:, t] = gae
        batch["returns"] = adv + values
        mean = (adv * mask).sum() / mask.sum()
        var = (((adv - mean) ** 2) * mask).sum() / mask.sum()
        batch["advantages"] = (adv - mean) * torch.rsqrt(var + 1e-8) * mask
        return score.mean()

    def fit(self, total_steps):
        for step in range(total_steps):
            idx = torch.randint(0, len(self.prompts), (self.train_batch_size,), generator=self.g)
            seq, mask = self.generate_sequences(self.prompts[idx])
            with torch.no_grad():
                batch = {"seq": seq, "response_mask": mask, "old_log_probs": self.actor.log_probs(seq),
                         "values": self.critic.compute_values(seq)}
            score = self.compute_advantage(batch)
            for start in range(0, self.train_batch_size, self.ppo_mini_batch_size):
                mini = {k: v[start:start + self.ppo_mini_batch_size] for k, v in batch.items()}
                vf_loss, critic_gn = self.critic.update_critic(mini)
                actor_gn = self.actor.update_policy(mini)
            if step % 5 == 0:
                print(f"step {step} score {score:.3f} vf_loss {vf_loss:.4f} critic grad_norm {critic_gn:.3f} "
                      f"actor grad_norm {actor_gn:.3f}")


def main():
    torch.manual_seed(0)
    prompts = torch.randint(2, VOCAB, (512, PROMPT_LEN), generator=torch.Generator().manual_seed(0))
    RayPPOTrainer(prompts).fit(total_steps=30)


if __name__ == "__main__":
    main()
