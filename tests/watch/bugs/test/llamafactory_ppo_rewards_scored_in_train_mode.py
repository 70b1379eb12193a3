"""PPO stage of an RLHF pipeline in the LLaMA-Factory style: one causal LM with a value head carries
two LoRA adapters, the trainable policy adapter and a frozen reward adapter, and a PPOPeftTrainer
class runs ppo_train(): get_inputs() samples responses, get_rewards() swaps in the reward adapter
and reward head with replace_model(model, "reward"), scores each sequence at its last token and
swaps back, then step() runs the PPO update on mini-batches. The LoRA layers use lora_dropout=0.1.
The model is never put in eval() for the rollout: after the PPO update it is still in train mode,
so the responses are sampled and, above all, the rewards are scored with LoRA dropout active. Each
reward is the reward model's output under a random dropout mask, noise the policy is trained on.

Thread: https://github.com/hiyouga/LlamaFactory/issues/761
"""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, PROMPT_LEN, RESPONSE_LEN, DIM = 16, 4, 6, 48


class LoraLinear(nn.Module):
    def __init__(self, base, r=8, alpha=16, lora_dropout=0.1, adapters=("default", "reward")):
        super().__init__()
        self.base = base.requires_grad_(False)
        self.lora_A = nn.ParameterDict({a: nn.Parameter(torch.randn(r, base.in_features) * 0.1) for a in adapters})
        self.lora_B = nn.ParameterDict({a: nn.Parameter(torch.zeros(base.out_features, r)) for a in adapters})
        self.lora_dropout = nn.Dropout(lora_dropout)
        self.scaling, self.active_adapter, self.disabled = alpha / r, "default", False

    def forward(self, x):
        out = self.base(x)
        if self.disabled:
            return out
        a = self.active_adapter
        return out + self.lora_dropout(x) @ self.lora_A[a].t() @ self.lora_B[a].t() * self.scaling


class CausalLMWithValueHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, DIM)
        self.rnn = nn.GRU(DIM, DIM, batch_first=True)
        self.up_proj = LoraLinear(nn.Linear(DIM, 2 * DIM))
        self.down_proj = LoraLinear(nn.Linear(2 * DIM, DIM))
        self.lm_head = nn.Linear(DIM, VOCAB)
        self.v_head = nn.Linear(DIM, 1)
        self.register_buffer("reward_head_weight", torch.randn(1, DIM) * 0.5)
        self.register_buffer("reward_head_bias", torch.zeros(1))
        self.register_buffer("default_head_weight", torch.zeros(1, DIM))
        self.register_buffer("default_head_bias", torch.zeros(1))
        for p in [*self.embed_tokens.parameters(), *self.rnn.parameters(), *self.lm_head.parameters()]:
            p.requires_grad_(False)

    def loras(self):
        return [m for m in self.modules() if isinstance(m, LoraLinear)]

    def forward(self, input_ids):
        h = self.rnn(self.embed_tokens(input_ids))[0]
        h = h + self.down_proj(F.gelu(self.up_proj(h)))
        return self.lm_head(h), None, self.v_head(h).squeeze(-1)


def replace_model(model, target):
    with torch.no_grad():
        if target == "reward":
            model.default_head_weight.copy_(model.v_head.weight)
            model.default_head_bias.copy_(model.v_head.bias)
        src = "reward" if target == "reward" else "default"
        model.v_head.weight.copy_(getattr(model, f"{src}_head_weight"))
        model.v_head.bias.copy_(getattr(model, f"{src}_head_bias"))
    for m in model.loras():
        m.active_adapter = target


def logprobs_from_logits(logits, labels):
    return F.log_softmax(logits, -1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)


class PPOPeftTrainer:
    def __init__(self, model, prompts, batch_size=16, mini_batch_size=8, ppo_epochs=4, lr=2e-3,
                 kl_coef=0.05, cliprange=0.2, cliprange_value=0.2, vf_coef=0.1):
        self.model, self.prompts = model, prompts
        self.batch_size, self.mini_batch_size, self.ppo_epochs = batch_size, mini_batch_size, ppo_epochs
        self.kl_coef, self.cliprange, self.cliprange_value, self.vf_coef = kl_coef, cliprange, cliprange_value, vf_coef
        self.optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
        self.g = torch.Generator().manual_seed(1)

    @torch.no_grad()
    def get_inputs(self, queries):
        seq = queries
        for _ in range(RESPONSE_LEN):
            logits = self.model(seq)[0][:, -1]
            seq = torch.cat([seq, torch.multinomial(F.softmax(logits, -1), 1, generator=self.g)], 1)
        return seq[:, PROMPT_LEN:]

    @torch.no_grad()
    def get_rewards(self, queries, responses):
        replace_model(self.model, target="reward")
        _, _, values = self.model(torch.cat([queries, responses], 1))
        rewards = values[:, -1].float()
        replace_model(self.model, target="default")
        return rewards

    def batched_forward_pass(self, seq):
        logits, _, values = self.model(seq)
        logprobs = logprobs_from_logits(logits[:, :-1], seq[:, 1:])[:, PROMPT_LEN - 1:]
        return logprobs, values[:, PROMPT_LEN - 1:-1]

    def step(self, queries, responses, scores):
        seq = torch.cat([queries, responses], 1)
        with torch.no_grad():
            old_logprobs, old_values = self.batched_forward_pass(seq)
            for m in self.model.loras():
                m.disabled = True
            ref_logprobs, _ = self.batched_forward_pass(seq)
            for m in self.model.loras():
                m.disabled = False
            rewards = -self.kl_coef * (old_logprobs - ref_logprobs)
            rewards[:, -1] += scores
            advantages, last = torch.zeros_like(rewards), torch.zeros(len(seq))
            for t in reversed(range(RESPONSE_LEN)):
                next_v = old_values[:, t + 1] if t + 1 < RESPONSE_LEN else torch.zeros(len(seq))
                last = rewards[:, t] + next_v - old_values[:, t] + 0.95 * last
                advantages[:, t] = last
            returns = advantages + old_values
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        self.model.train()
        for _ in range(self.ppo_epochs):
            order = torch.randperm(len(seq), generator=self.g)
            for i in range(0, len(seq), self.mini_batch_size):
                idx = order[i:i + self.mini_batch_size]
                logprobs, values = self.batched_forward_pass(seq[idx])
                ratio = torch.exp(logprobs - old_logprobs[idx])
                pg_loss = torch.max(-advantages[idx] * ratio,
                                    -advantages[idx] * ratio.clamp(1 - self.cliprange, 1 + self.cliprange)).mean()
                v_clip = old_values[idx] + (values - old_values[idx]).clamp(-self.cliprange_value, self.cliprange_value)
                vf_loss = 0.5 * torch.max((values - returns[idx]) ** 2, (v_clip - returns[idx]) ** 2).mean()
                loss = pg_loss + self.vf_coef * vf_loss
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
        return loss.item()

    def ppo_train(self, max_steps):
        for step in range(max_steps):
            idx = torch.randint(0, len(self.prompts), (self.batch_size,), generator=self.g)
            queries = self.prompts[idx]
            responses = self.get_inputs(queries)
            rewards = self.get_rewards(queries, responses)
            loss = self.step(queries, responses, rewards)
            if step % 2 == 0:
                print(f"ppo step {step} loss {loss:.4f} reward {rewards.mean().item():.4f}")


def main():
    torch.manual_seed(0)
    model = CausalLMWithValueHead()
    for m in model.loras():
        for a in ("reward",):
            nn.init.normal_(m.lora_B[a], std=0.3)
            m.lora_A[a].requires_grad_(False)
            m.lora_B[a].requires_grad_(False)
    prompts = torch.randint(2, VOCAB, (256, PROMPT_LEN), generator=torch.Generator().manual_seed(0))
    PPOPeftTrainer(model, prompts).ppo_train(max_steps=10)


if __name__ == "__main__":
    main()
