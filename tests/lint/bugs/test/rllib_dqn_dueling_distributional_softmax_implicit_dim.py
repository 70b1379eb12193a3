"""
Shape: an RL library's functional DQN torch policy: a compute_q_values(policy, model, input_dict, state_batches, seq_lens, explore, is_training) helper calls model.get_q_value_distributions and, for the dueling head with distributional atoms, recentres the per-action support logits around their mean, adds the state value and turns them into per-atom probabilities; a QLoss class builds the categorical projection loss; build_q_losses(policy, model, dist_class, train_batch) runs the online and target networks through compute_q_values, selects the taken and best actions and stores the loss on the model's tower_stats; an adam_optimizer(policy, config) factory and build_policy_class wire them together.
Bug: in the dueling distributional branch the support logits of shape (batch, actions, atoms) go through nn.functional.softmax without dim; for a 3-D tensor the implicit dimension is 0, so the atom probabilities are normalised across the batch instead of over the atoms.
Thread: https://github.com/ray-project/ray/pull/16311
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from ray.rllib.agents.dqn.dqn_tf_policy import PRIO_WEIGHTS
from ray.rllib.policy.policy_template import build_policy_class
from ray.rllib.policy.sample_batch import SampleBatch
from ray.rllib.utils.torch_ops import huber_loss, reduce_mean_ignore_inf


class QLoss:
    def __init__(self, q_sel, q_logits_sel, q_best, q_best_probs, weights, rewards, dones,
                 gamma=0.99, n_step=1, num_atoms=1, v_min=-10.0, v_max=10.0):
        if num_atoms > 1:
            support = torch.arange(0.0, num_atoms, dtype=torch.float32).to(rewards.device)
            support = v_min + support * (v_max - v_min) / float(num_atoms - 1)
            r_tau = rewards.unsqueeze(-1) + (gamma ** n_step) * (1.0 - dones.float()).unsqueeze(-1) * support
            r_tau = torch.clamp(r_tau, v_min, v_max)
            b = (r_tau - v_min) / ((v_max - v_min) / float(num_atoms - 1))
            lb, ub = torch.floor(b), torch.ceil(b)
            floor_eq_ceil = ((ub - lb) < 0.5).float()
            lb_mask = F.one_hot(lb.long(), num_atoms)
            ub_mask = F.one_hot(ub.long(), num_atoms)
            ml = (ub - b + floor_eq_ceil).unsqueeze(-1) * lb_mask * q_best_probs.unsqueeze(-1)
            mu = (b - lb).unsqueeze(-1) * ub_mask * q_best_probs.unsqueeze(-1)
            target = (ml + mu).sum(dim=1).detach()
            self.td_error = -torch.sum(target * F.log_softmax(q_logits_sel, dim=-1), dim=-1)
            self.loss = torch.mean(self.td_error * weights)
        else:
            target = rewards + (gamma ** n_step) * (1.0 - dones.float()) * q_best
            self.td_error = q_sel - target.detach()
            self.loss = torch.mean(weights * huber_loss(self.td_error))


def compute_q_values(policy, model, input_dict, state_batches=None, seq_lens=None, explore=None,
                     is_training=False):
    cfg = policy.config
    input_dict["is_training"] = is_training
    model_out, state = model(input_dict, state_batches or [], seq_lens)
    if cfg["num_atoms"] > 1:
        scores, z, atom_logits, logits, probs_or_logits = model.get_q_value_distributions(model_out)
    else:
        scores, logits, probs_or_logits = model.get_q_value_distributions(model_out)
    if cfg["dueling"]:
        v = model.get_state_value(model_out)
        if cfg["num_atoms"] > 1:
            centred = atom_logits - torch.unsqueeze(torch.mean(atom_logits, dim=1), dim=1)
            atom_logits = torch.unsqueeze(v, dim=1) + centred
            atom_probs = nn.functional.softmax(atom_logits)
            value = torch.sum(z * atom_probs, dim=-1)
            logits, probs_or_logits = atom_logits, atom_probs
        else:
            adv = scores - torch.unsqueeze(reduce_mean_ignore_inf(scores, 1), 1)
            value = v + adv
    else:
        value = scores
    return value, logits, probs_or_logits, state


def build_q_losses(policy, model, dist_class, train_batch):
    cfg = policy.config
    q_t, q_logits_t, _, _ = compute_q_values(
        policy, model, {"obs": train_batch[SampleBatch.CUR_OBS]}, explore=False, is_training=True)
    q_tp1, _, q_probs_tp1, _ = compute_q_values(
        policy, policy.target_q_model, {"obs": train_batch[SampleBatch.NEXT_OBS]}, explore=False,
        is_training=True)
    n_act = policy.action_space.n
    taken = F.one_hot(train_batch[SampleBatch.ACTIONS].long(), n_act)
    q_sel = torch.sum(torch.where(q_t > float("-inf"), q_t, torch.tensor(0.0, device=q_t.device)) * taken, 1)
    q_logits_sel = torch.sum(q_logits_t * torch.unsqueeze(taken, -1), 1)
    best = F.one_hot(torch.argmax(q_tp1, 1), n_act)
    q_best = torch.sum(q_tp1 * best, 1)
    q_best_probs = torch.sum(q_probs_tp1 * torch.unsqueeze(best, -1), 1)
    loss_obj = QLoss(q_sel, q_logits_sel, q_best, q_best_probs, train_batch[PRIO_WEIGHTS],
                     train_batch[SampleBatch.REWARDS], train_batch[SampleBatch.DONES], cfg["gamma"],
                     cfg["n_step"], cfg["num_atoms"], cfg["v_min"], cfg["v_max"])
    model.tower_stats["td_error"] = loss_obj.td_error
    model.tower_stats["q_loss"] = loss_obj
    return loss_obj.loss


def adam_optimizer(policy, config):
    return torch.optim.Adam(policy.model.parameters(), lr=policy.cur_lr, eps=config["adam_epsilon"])


DQNTorchPolicySketch = build_policy_class(
    name="DQNTorchPolicySketch",
    framework="torch",
    loss_fn=build_q_losses,
    optimizer_fn=adam_optimizer,
)
