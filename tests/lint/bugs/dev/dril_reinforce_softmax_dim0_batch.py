"""
Shape: book notebook flattened to a script: a torch.nn.Sequential policy (Linear, LeakyReLU, Linear, Softmax) with Adam; discount_rewards() and a hand-written REINFORCE loss_fn(preds, r); an episode loop that samples actions from single-state predictions, then re-runs the policy on the whole episode's state batch, gathers the taken actions' probabilities and steps.
Bug: the policy ends in torch.nn.Softmax(dim=0); that is right for one 1-D state but when the (T, 4) episode batch is fed for the update it normalises over the T time steps instead of over the 2 actions.
Thread: https://github.com/DeepReinforcementLearning/DeepReinforcementLearningInAction/issues/32
"""
import gym
import numpy as np
import torch

env = gym.make("CartPole-v0")

n_in = 4
n_hidden = 150
n_out = 2

model = torch.nn.Sequential(
    torch.nn.Linear(n_in, n_hidden),
    torch.nn.LeakyReLU(),
    torch.nn.Linear(n_hidden, n_out),
    torch.nn.Softmax(dim=0),
)

learning_rate = 0.009
optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)


def discount_rewards(rewards, gamma=0.99):
    n = len(rewards)
    ret = torch.pow(gamma, torch.arange(n).float()) * rewards
    ret /= ret.max()
    return ret


def loss_fn(preds, r):
    return -1 * torch.sum(r * torch.log(preds))


MAX_DUR = 200
MAX_EPISODES = 500
score = []
for episode in range(MAX_EPISODES):
    state = env.reset()
    done = False
    transitions = []
    for t in range(MAX_DUR):
        probs = model(torch.from_numpy(state).float())
        action = np.random.choice(np.array([0, 1]), p=probs.data.numpy())
        prev_state = state
        state, _, done, info = env.step(action)
        transitions.append((prev_state, action, t + 1))
        if done:
            break

    score.append(len(transitions))
    reward_batch = torch.Tensor([r for (s, a, r) in transitions]).flip(dims=(0,))
    returns = discount_rewards(reward_batch)
    state_batch = torch.Tensor([s for (s, a, r) in transitions])
    action_batch = torch.Tensor([a for (s, a, r) in transitions])
    pred_batch = model(state_batch)
    prob_batch = pred_batch.gather(dim=1, index=action_batch.long().view(-1, 1)).squeeze()
    loss = loss_fn(prob_batch, returns)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
