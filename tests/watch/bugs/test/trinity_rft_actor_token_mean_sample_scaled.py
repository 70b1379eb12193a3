"""A Trinity-RFT / verl-style GRPO trainer: a DataLoader of prompts, an explorer that samples a group
of responses per prompt from the current policy and scores them, group-normalised advantages, and a
DataParallelPPOActor.update_policy() that splits the mini-batch into micro-batches, recomputes the
response log-probs, aggregates the clipped policy-gradient loss with loss_agg_mode="token-mean"
(mean over that micro-batch's response tokens), multiplies it by the micro-batch's share of the
mini-batch's sequences (loss_scale_factor = micro-batch size / mini-batch size) and calls backward,
then clips and steps the optimizer once per mini-batch. The micro-batch weight counts sequences
while the loss inside is a per-token mean, so a micro-batch of short responses gets the same
weight as one of long responses: its tokens count several times more, and the update is not the
token mean over the mini-batch that "token-mean" promises.

Thread: https://github.com/agentscope-ai/Trinity-RFT/pull/336
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB = 16
EOS = 1
TARGET = 5
MAX_RESPONSE_LEN = 24


class Policy(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.cell = nn.GRUCell(dim, dim)
        self.head = nn.Linear(dim, VOCAB)

    def step(self, tok, h):
        h = self.cell(self.embed(tok), h)
        return self.head(h), h

    def log_probs(self, prompts, responses):
        h = torch.zeros(prompts.shape[0], self.cell.hidden_size)
        tok = prompts
        out = []
        for t in range(responses.shape[1]):
            logits, h = self.step(tok, h)
            out.append(torch.log_softmax(logits, -1).gather(1, responses[:, t:t + 1]).squeeze(1))
            tok = responses[:, t]
        return torch.stack(out, 1)


@torch.no_grad()
def explore(policy, prompts, n):
    """Sample n responses per prompt; reward = share of TARGET tokens in the response."""
    prompts = prompts.repeat_interleave(n)
    b = prompts.shape[0]
    h = torch.zeros(b, policy.cell.hidden_size)
    tok, done = prompts, torch.zeros(b, dtype=torch.bool)
    responses = torch.full((b, MAX_RESPONSE_LEN), EOS)
    mask = torch.zeros(b, MAX_RESPONSE_LEN)
    for t in range(MAX_RESPONSE_LEN):
        logits, h = policy.step(tok, h)
        tok = torch.multinomial(F.softmax(logits, -1), 1).squeeze(1)
        responses[:, t] = torch.where(done, torch.tensor(EOS), tok)
        mask[:, t] = (~done).float()
        done = done | (tok == EOS)
    n_tok = mask.sum(1)
    reward = ((responses == TARGET).float() * mask).sum(1) / n_tok
    adv = (reward.view(-1, n) - reward.view(-1, n).mean(1, keepdim=True)) / (reward.view(-1, n).std(1, keepdim=True) + 1e-6)
    old_log_probs = policy.log_probs(prompts, responses)
    return {"prompts": prompts, "responses": responses, "response_mask": mask,
            "advantages": adv.view(-1, 1).expand(-1, MAX_RESPONSE_LEN), "old_log_probs": old_log_probs,
            "reward": reward, "n_tok": n_tok}


def masked_mean(x, mask):
    return (x * mask).sum() / mask.sum().clamp(min=1)


def agg_loss(loss_mat, loss_mask, loss_agg_mode):
    if loss_agg_mode == "token-mean":
        return masked_mean(loss_mat, loss_mask)
    raise ValueError(loss_agg_mode)


class DataParallelPPOActor:
    def __init__(self, policy, optimizer, ppo_mini_batch_size, ppo_micro_batch_size, clip_ratio=0.2,
                 loss_agg_mode="token-mean", grad_clip=1.0):
        self.policy, self.optimizer = policy, optimizer
        self.ppo_mini_batch_size, self.ppo_micro_batch_size = ppo_mini_batch_size, ppo_micro_batch_size
        self.clip_ratio, self.loss_agg_mode, self.grad_clip = clip_ratio, loss_agg_mode, grad_clip

    def update_policy(self, data):
        metrics = []
        n = data["prompts"].shape[0]
        for start in range(0, n, self.ppo_mini_batch_size):
            mini = {k: v[start:start + self.ppo_mini_batch_size] for k, v in data.items()}
            self.optimizer.zero_grad()
            for m in range(0, self.ppo_mini_batch_size, self.ppo_micro_batch_size):
                micro = {k: v[m:m + self.ppo_micro_batch_size] for k, v in mini.items()}
                response_mask = micro["response_mask"]
                log_prob = self.policy.log_probs(micro["prompts"], micro["responses"])
                ratio = torch.exp(log_prob - micro["old_log_probs"])
                pg_losses = torch.max(-micro["advantages"] * ratio,
                                      -micro["advantages"] * ratio.clamp(1 - self.clip_ratio, 1 + self.clip_ratio))
                pg_loss = agg_loss(pg_losses, response_mask, self.loss_agg_mode)
                loss_scale_factor = response_mask.shape[0] / self.ppo_mini_batch_size
                loss = pg_loss * loss_scale_factor
                loss.backward()
                metrics.append(pg_loss.item())
            torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.grad_clip)
            self.optimizer.step()
        return sum(metrics) / len(metrics)


def main():
    torch.manual_seed(0)
    prompts = TensorDataset(torch.randint(2, VOCAB, (512,)))
    taskset = DataLoader(prompts, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(0))
    policy = Policy()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=3e-3, weight_decay=0.0)
    actor = DataParallelPPOActor(policy, optimizer, ppo_mini_batch_size=16, ppo_micro_batch_size=2)
    step = 0
    for epoch in range(2):
        for (batch_prompts,) in taskset:
            exp = explore(policy, batch_prompts, n=4)
            pg_loss = actor.update_policy(exp)
            if step % 10 == 0:
                print(f"step {step:3d}  reward {exp['reward'].mean():.3f}  resp_len {exp['n_tok'].mean():.1f}  "
                      f"pg_loss {pg_loss:+.4f}")
            step += 1
            if step >= 64:
                return


if __name__ == "__main__":
    main()
