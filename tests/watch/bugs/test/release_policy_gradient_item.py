"""A Reinforcement class whose policy_gradient(n_batch) method samples sequences from a generator,
scores them with a reward function and accumulates the REINFORCE loss from log_probs[...].item():
every term is a plain number, the sum lives on a fresh leaf tensor, backward() succeeds and the
generator's parameters never receive a gradient.

Thread: https://github.com/isayev/ReLeaSE/issues/39
"""
import torch
import torch.nn.functional as F
from torch import nn


class StackRNNGenerator(nn.Module):
    def __init__(self, vocab=20, hidden=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.rnn = nn.GRUCell(hidden, hidden)
        self.out = nn.Linear(hidden, vocab)
        self.hidden = hidden

    def forward(self, inp, hidden):
        hidden = self.rnn(self.embed(inp), hidden)
        return self.out(hidden), hidden

    def init_hidden(self):
        return torch.zeros(1, self.hidden)


def reward_fn(tokens):
    return sum(1.0 for t in tokens if t < 5) / len(tokens)  # the property to maximise


class Reinforcement:
    def __init__(self, generator, get_reward, gamma=0.97):
        self.generator = generator
        self.get_reward = get_reward
        self.gamma = gamma
        self.optimizer = torch.optim.Adam(generator.parameters(), lr=1e-3)

    def sample(self, g, length=12):
        hidden, inp, tokens = self.generator.init_hidden(), torch.zeros(1, dtype=torch.long), []
        for _ in range(length):
            with torch.no_grad():
                logits, hidden = self.generator(inp, hidden)
            inp = torch.multinomial(F.softmax(logits, dim=1), 1, generator=g).view(1)
            tokens.append(int(inp))
        return tokens

    def policy_gradient(self, g, n_batch=8):
        rl_loss = torch.tensor(0.0, requires_grad=True)
        total_reward = 0.0
        self.optimizer.zero_grad()
        for _ in range(n_batch):
            trajectory = self.sample(g)
            reward = self.get_reward(trajectory)
            discounted_reward = reward
            hidden, inp = self.generator.init_hidden(), torch.zeros(1, dtype=torch.long)
            for p in range(len(trajectory)):
                output, hidden = self.generator(inp, hidden)
                log_probs = F.log_softmax(output, dim=1)
                top_i = trajectory[p]
                rl_loss = rl_loss - log_probs[0, top_i].item() * discounted_reward
                discounted_reward = discounted_reward * self.gamma
                inp = torch.tensor([top_i])
            total_reward += reward
        rl_loss = rl_loss / n_batch
        rl_loss.backward()
        self.optimizer.step()
        return total_reward / n_batch, rl_loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    rl = Reinforcement(StackRNNGenerator(), reward_fn)
    for it in range(60):
        reward, loss = rl.policy_gradient(g)
        if it % 10 == 0:
            print(f"iter {it} mean reward {reward:.3f} rl loss {loss:.3f}")


if __name__ == "__main__":
    main()
