"""A robot-learning training script for an ACT-style policy: ACTPolicy wraps the network as
`self.model`, an ACT module whose `backbone` is a pretrained image encoder (here a small stand-in
that already holds the features the task needs) and whose decoder head is freshly initialised and
predicts a chunk of future actions from the image features and the robot state. train(cfg) builds
the dataset, the DataLoader and the policy, then make_optimizer_and_scheduler(cfg, policy) splits
the parameters into two AdamW groups by name, the backbone meant to get cfg.training.lr_backbone
and everything else cfg.training.lr; the loop calls policy.forward(batch)["loss"], backward, clips
the gradient norm, steps and zeroes the optimizer.

The split tests `n.startswith("backbone")`, but named_parameters() of the policy yields names like
"model.backbone.0.weight", so no name ever matches: the backbone group is empty and the pretrained
encoder lands in the first group at the head's learning rate, 300x the lr_backbone it was given.
Nothing errors; on the small demonstration set the encoder's pretrained features are rewritten to
fit the training episodes, and the held-out action error ends well above that of the same run with
the backbone at its own lr.

Thread: https://github.com/huggingface/lerobot/pull/280
"""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

IMG_DIM, FEAT_DIM, STATE_DIM, ACTION_DIM, CHUNK = 128, 24, 6, 6, 8

# the feature map a pretrained encoder would already provide
_g = torch.Generator().manual_seed(123)
TRUE_FEATURES = torch.randn(IMG_DIM, FEAT_DIM, generator=_g) / math.sqrt(IMG_DIM)
ACTION_MAP = torch.randn(FEAT_DIM, ACTION_DIM * CHUNK, generator=_g) / math.sqrt(FEAT_DIM)
STATE_MAP = 0.3 * torch.randn(STATE_DIM, ACTION_DIM * CHUNK, generator=_g)


class DemonstrationDataset(Dataset):
    """Frames of teleoperated episodes: a flattened camera image, the joint state, the next actions."""

    def __init__(self, num_frames, seed):
        g = torch.Generator().manual_seed(seed)
        self.images = torch.randn(num_frames, IMG_DIM, generator=g)
        self.states = torch.randn(num_frames, STATE_DIM, generator=g)
        feats = torch.relu(self.images @ TRUE_FEATURES)
        actions = feats @ ACTION_MAP + self.states @ STATE_MAP
        actions = actions + 0.05 * torch.randn(actions.shape, generator=g)
        self.actions = actions.view(num_frames, CHUNK, ACTION_DIM)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return {"observation.images.top": self.images[i], "observation.state": self.states[i],
                "action": self.actions[i]}


def pretrained_backbone():
    backbone = nn.Sequential(nn.Linear(IMG_DIM, FEAT_DIM), nn.ReLU(), nn.Linear(FEAT_DIM, FEAT_DIM), nn.ReLU())
    with torch.no_grad():  # stands in for loading ImageNet weights
        backbone[0].weight.copy_(TRUE_FEATURES.T)
        backbone[0].bias.zero_()
        backbone[2].weight.copy_(torch.eye(FEAT_DIM))
        backbone[2].bias.zero_()
    return backbone


class ACT(nn.Module):
    def __init__(self, dim_model=64):
        super().__init__()
        self.backbone = pretrained_backbone()
        self.encoder_img_feat_input_proj = nn.Linear(FEAT_DIM, dim_model)
        self.encoder_robot_state_input_proj = nn.Linear(STATE_DIM, dim_model)
        self.decoder = nn.Sequential(nn.ReLU(), nn.Linear(dim_model, dim_model), nn.ReLU())
        self.action_head = nn.Linear(dim_model, ACTION_DIM * CHUNK)

    def forward(self, batch):
        feat = self.backbone(batch["observation.images.top"])
        tokens = self.encoder_img_feat_input_proj(feat) + self.encoder_robot_state_input_proj(
            batch["observation.state"])
        return self.action_head(self.decoder(tokens)).view(-1, CHUNK, ACTION_DIM)


class ACTPolicy(nn.Module):
    name = "act"

    def __init__(self):
        super().__init__()
        self.model = ACT()

    def forward(self, batch):
        actions_hat = self.model(batch)
        l1_loss = F.l1_loss(batch["action"], actions_hat)
        return {"loss": l1_loss, "l1_loss": l1_loss.item()}


def make_optimizer_and_scheduler(cfg, policy):
    if cfg["policy"]["name"] == "act":
        optimizer_params_dicts = [
            {
                "params": [
                    p for n, p in policy.named_parameters() if not n.startswith("backbone") and p.requires_grad
                ]
            },
            {
                "params": [p for n, p in policy.named_parameters() if n.startswith("backbone") and p.requires_grad],
                "lr": cfg["training"]["lr_backbone"],
            },
        ]
        optimizer = torch.optim.AdamW(optimizer_params_dicts, lr=cfg["training"]["lr"],
                                      weight_decay=cfg["training"]["weight_decay"])
        lr_scheduler = None
    else:
        raise NotImplementedError()
    return optimizer, lr_scheduler


@torch.no_grad()
def eval_policy(policy, dataset):
    policy.eval()
    batch = {k: torch.stack([dataset[i][k] for i in range(len(dataset))]) for k in dataset[0]}
    err = F.l1_loss(policy.model(batch), batch["action"]).item()
    policy.train()
    return err


def train(cfg):
    torch.manual_seed(cfg["seed"])
    dataset = DemonstrationDataset(cfg["training"]["num_frames"], seed=0)
    eval_set = DemonstrationDataset(2000, seed=1)
    dataloader = DataLoader(dataset, batch_size=cfg["training"]["batch_size"], shuffle=True, drop_last=True,
                            generator=torch.Generator().manual_seed(cfg["seed"]))
    policy = ACTPolicy()
    optimizer, lr_scheduler = make_optimizer_and_scheduler(cfg, policy)
    print("param groups:", [len(g["params"]) for g in optimizer.param_groups],
          "lrs:", [g["lr"] for g in optimizer.param_groups])
    step = 0
    policy.train()
    while step < cfg["training"]["offline_steps"]:
        for batch in dataloader:
            output_dict = policy.forward(batch)
            loss = output_dict["loss"]
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg["training"]["grad_clip_norm"])
            optimizer.step()
            optimizer.zero_grad()
            if lr_scheduler is not None:
                lr_scheduler.step()
            if step % cfg["training"]["log_freq"] == 0:
                print(f"step {step:4d}  l1 {output_dict['l1_loss']:.4f}  grad_norm {grad_norm:.3f}")
            if step > 0 and step % cfg["training"]["eval_freq"] == 0:
                print(f"step {step:4d}  held-out action l1 {eval_policy(policy, eval_set):.4f}")
            step += 1
            if step >= cfg["training"]["offline_steps"]:
                break
    print(f"final held-out action l1 {eval_policy(policy, eval_set):.4f}")


if __name__ == "__main__":
    cfg = {
        "seed": 1000,
        "policy": {"name": "act"},
        "training": {"offline_steps": 300, "batch_size": 16, "num_frames": 96, "lr": 3e-3, "lr_backbone": 1e-5,
                     "weight_decay": 1e-4, "grad_clip_norm": 10, "log_freq": 50, "eval_freq": 100},
    }
    train(cfg)
