"""A two-camera visuomotor policy in the DensePolicy style: the dataset yields uint8 images from a
top camera and a hand camera stored channels-last as (batch, cam_len, H, W, C) plus a normalized
action chunk; the DSP module's forward(imgtop, imghand, actions=None) scales the images to [0, 1],
folds them into a batch of images for two small ResNet-like encoders (one per camera), concatenates
the two readouts into a condition token, and decodes the action chunk coarse-to-fine (upsample the
current chunk, append the condition, run a transformer encoder, keep the chunk positions) before a
linear action projection; with actions given it returns the per-sample-mean MSE. The train()
function builds AdamW and a cosine schedule with warmup and loops epoch -> batch: loss = policy(...),
backward, step, zero_grad, scheduler step.

Bug: to get (N, C, H, W) for the convolutions, forward() calls imgtop.reshape(-1, channels,
height, width) on channels-last data. reshape keeps the memory order, so each "channel plane" is a
strip of interleaved r, g, b values from a third of the picture rather than one colour channel; the
shapes match, nothing errors, and the encoders see a scrambled image, so the policy learns the
visual cue much worse. The thread pointed out that permute is needed to go from HWC to CHW, and the
author agreed and said the code would be updated.

Thread: https://github.com/Selen-Suyue/DensePolicy2D/issues/3
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1)
        self.bn1 = nn.GroupNorm(4, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.bn2 = nn.GroupNorm(4, cout)
        self.extra = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride), nn.GroupNorm(4, cout))
                      if (stride != 1 or cin != cout) else nn.Identity())

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(self.extra(x) + out)


class SmallResNet(nn.Module):
    def __init__(self, out_dim=32):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.layer1 = BasicBlock(16, 16, 1)
        self.layer2 = BasicBlock(16, 32, 2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, out_dim)

    def forward(self, x):
        out = self.layer2(self.layer1(self.conv1(x)))
        out = self.avgpool(out).reshape(x.shape[0], -1)
        return self.fc(out)


class DSP(nn.Module):
    def __init__(self, num_action=8, action_dim=4, obs_feature_dim=64):
        super().__init__()
        self.num_action = num_action
        self.cam1 = SmallResNet(obs_feature_dim // 2)
        self.cam2 = SmallResNet(obs_feature_dim // 2)
        layer = nn.TransformerEncoderLayer(obs_feature_dim, nhead=4, dim_feedforward=128,
                                           dropout=0.0, batch_first=True)
        self.cross_attention = nn.TransformerEncoder(layer, num_layers=1)
        self.upsample = nn.Upsample(scale_factor=2, mode="linear")
        self.action_projection = nn.Linear(obs_feature_dim, action_dim)

    def transform(self, img):
        return (img - MEAN) / STD

    def decode(self, readout, length):
        condition = readout.unsqueeze(1)
        action_pred = torch.zeros(condition.size(0), 1, condition.size(2))
        while action_pred.shape[1] < length:
            action_pred = self.upsample(action_pred.transpose(1, 2)).transpose(1, 2)
            tokens = torch.cat([action_pred, condition], dim=1)
            hidden = self.cross_attention(tokens)
            action_pred = hidden[:, :action_pred.shape[1], :]
        return self.action_projection(action_pred[:, :length, :])

    def forward(self, imgtop, imghand, actions=None):
        batch_size, cam_len, height, width, channels = imgtop.shape
        imgtop = imgtop.float() / 255.0
        imghand = imghand.float() / 255.0
        top = self.transform(imgtop.reshape(-1, channels, height, width))
        hand = self.transform(imghand.reshape(-1, channels, height, width))
        readout = torch.cat((self.cam1(top), self.cam2(hand)), dim=-1)
        if actions is not None:
            action_pred = self.decode(readout, actions.shape[1])
            loss = F.mse_loss(action_pred, actions, reduction="none")
            loss = loss.reshape(loss.shape[0], -1).mean(dim=1)
            return loss.mean()
        with torch.no_grad():
            return self.decode(readout, self.num_action)


class RealWorldDataset(torch.utils.data.Dataset):
    """Scenes with a coloured block; the action chunk moves from the block toward a goal that depends
    on the block colour."""

    COLORS = torch.tensor([[220, 40, 40], [40, 200, 60], [50, 70, 230]], dtype=torch.float32)
    GOALS = torch.tensor([[0.8, -0.6], [-0.7, 0.7], [0.0, -0.9]])

    def __init__(self, n, seed, num_action=8, size=16):
        g = torch.Generator().manual_seed(seed)
        self.size = size
        self.num_action = num_action
        self.color_id = torch.randint(0, 3, (n,), generator=g)
        self.pos = torch.randint(2, size - 6, (n, 2), generator=g)
        self.noise_seed = torch.randint(0, 10_000, (n,), generator=g)

    def __len__(self):
        return len(self.color_id)

    def _render(self, i, shift):
        g = torch.Generator().manual_seed(int(self.noise_seed[i]) + shift)
        img = 90 + 25 * torch.rand(self.size, self.size, 3, generator=g)
        r, c = (self.pos[i] + shift).clamp(0, self.size - 4).tolist()
        img[r:r + 4, c:c + 4, :] = self.COLORS[self.color_id[i]]
        return img.clamp(0, 255).to(torch.uint8).unsqueeze(0)

    def __getitem__(self, i):
        start = self.pos[i].float() / self.size * 2 - 1
        goal = self.GOALS[self.color_id[i]]
        t = torch.linspace(0, 1, self.num_action).unsqueeze(1)
        xy = start + t * (goal - start)
        action = torch.cat([xy, torch.sin(3 * t), torch.full_like(t, float(self.color_id[i]) - 1)], 1)
        return {"colors_list": self._render(i, 0), "hand_colors_list": self._render(i, 1),
                "action_normalized": action}


def cosine_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
    def lr_lambda(step):
        if step < num_warmup_steps:
            return float(step) / float(max(1, num_warmup_steps))
        progress = float(step - num_warmup_steps) / float(max(1, num_training_steps - num_warmup_steps))
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)


def train(args):
    torch.manual_seed(args["seed"])
    dataset = RealWorldDataset(480, seed=1, num_action=args["num_action"])
    dataloader = torch.utils.data.DataLoader(dataset, batch_size=args["batch_size"], shuffle=True)
    policy = DSP(num_action=args["num_action"])
    optimizer = torch.optim.AdamW(policy.parameters(), lr=args["lr"], betas=[0.95, 0.999],
                                  weight_decay=1e-6)
    lr_scheduler = cosine_schedule_with_warmup(optimizer, num_warmup_steps=10,
                                               num_training_steps=len(dataloader) * args["num_epochs"])
    train_history = []
    policy.train()
    for epoch in range(args["num_epochs"]):
        optimizer.zero_grad()
        avg_loss = 0.0
        for data in dataloader:
            loss = policy(imgtop=data["colors_list"], imghand=data["hand_colors_list"],
                          actions=data["action_normalized"])
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            lr_scheduler.step()
            avg_loss += loss.item()
        avg_loss /= len(dataloader)
        train_history.append(avg_loss)
        print("Epoch {} train loss: {:.6f}".format(epoch, avg_loss))

    test = RealWorldDataset(200, seed=2, num_action=args["num_action"])
    batch = next(iter(torch.utils.data.DataLoader(test, batch_size=200)))
    policy.eval()
    pred = policy(batch["colors_list"], batch["hand_colors_list"])
    err = F.mse_loss(pred, batch["action_normalized"]).item()
    print("held-out action MSE: {:.4f}".format(err))


if __name__ == "__main__":
    train({"num_action": 8, "lr": 1e-3, "batch_size": 24, "num_epochs": 4, "seed": 233})
