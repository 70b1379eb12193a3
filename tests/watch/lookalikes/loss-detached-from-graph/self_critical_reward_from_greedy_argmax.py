"""Self-critical policy-gradient training of a small sequence tagger: the greedy tags (argmax of the
logits) give a baseline reward, sampled tags give the reward that is compared with it, and the loss
is -(reward - baseline) times the sampled tags' log-probabilities, plus a small entropy bonus. The
rewards come from indices and carry no gradient, but they weigh a term that does: the loss trains
the policy."""
import torch
from torch import nn
from torch.distributions import Categorical

TAGS, SEQ = 6, 10


def reward(tags, target):
    return (tags == target).float().mean(1)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    policy = nn.Sequential(nn.Embedding(20, 32), nn.Linear(32, TAGS))
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    for step in range(60):
        tokens = torch.randint(0, 20, (32, SEQ), generator=g)
        target = tokens % TAGS
        logits = policy(tokens)
        dist = Categorical(logits=logits)
        sampled = dist.sample()
        baseline = reward(logits.argmax(-1), target)
        advantage = reward(sampled, target) - baseline
        loss = -(advantage[:, None] * dist.log_prob(sampled)).mean() - 0.01 * dist.entropy().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(step, round(loss.item(), 4), round(baseline.mean().item(), 3))


if __name__ == "__main__":
    main()
