"""A hand-written DP-SGD image classifier: per-sample gradients come from vmap over grad of a
single-example loss (torch.func with functional_call), are stored as param.grad_sample, and a
clip_and_accumulate_and_add_noise(model, max_norm, noise_multiplier) helper clips each sample's
gradient, sums them, adds Gaussian noise and assigns the result to param.grad before a plain SGD
step. The noisy sum is never divided by the batch size, so every update is batch_size times the
averaged DP gradient that the learning rate was chosen for.

Thread: https://github.com/pytorch/functorch/issues/467
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad_and_value, vmap
from torch.utils.data import DataLoader, TensorDataset


class SmallConvNet(nn.Module):
    def __init__(self, n_classes=10, groups=4):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.gn1 = nn.GroupNorm(groups, 16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1, stride=2)
        self.gn2 = nn.GroupNorm(groups, 32)
        self.fc = nn.Linear(32, n_classes)

    def forward(self, x):
        x = F.relu(self.gn1(self.conv1(x)))
        x = F.relu(self.gn2(self.conv2(x)))
        return self.fc(x.mean(dim=(2, 3)))


def compute_norms(sample_grads):
    batch_size = sample_grads[0].shape[0]
    per_param = [g.reshape(batch_size, -1).norm(2, dim=1) for g in sample_grads]
    return torch.stack(per_param, dim=0).norm(2, dim=0)


def clip_and_accumulate_and_add_noise(model, max_per_sample_grad_norm=1.0, noise_multiplier=1.0):
    sample_grads = [p.grad_sample for p in model.parameters()]
    norms = compute_norms(sample_grads)
    factor = (max_per_sample_grad_norm / (norms + 1e-6)).clamp(max=1.0)
    summed = [torch.einsum("i,i...->...", factor, g) for g in sample_grads]
    std = max_per_sample_grad_norm * noise_multiplier
    noisy = [s + torch.normal(0.0, std, s.shape) for s in summed]
    for p, g in zip(model.parameters(), noisy):
        p.grad = g
        del p.grad_sample


def train(args, model, train_loader, optimizer, epoch):
    model.train()

    def loss_and_output(weights, image, target):
        out = functional_call(model, weights, (image.unsqueeze(0),))
        return F.cross_entropy(out, target.unsqueeze(0)), out.squeeze(0)

    per_sample = vmap(grad_and_value(loss_and_output, has_aux=True), in_dims=(None, 0, 0))
    losses, correct, seen = [], 0, 0
    for images, target in train_loader:
        params = {k: v.detach() for k, v in model.named_parameters()}
        grads, (sample_loss, output) = per_sample(params, images, target)
        for name, p in model.named_parameters():
            p.grad_sample = grads[name].detach()
        clip_and_accumulate_and_add_noise(model, args["max_per_sample_grad_norm"], args["sigma"])
        optimizer.step()
        optimizer.zero_grad()
        losses.append(sample_loss.mean().item())
        correct += (output.argmax(1) == target).sum().item()
        seen += len(target)
    print(f"Train Epoch: {epoch} Loss: {sum(losses) / len(losses):.4f} Acc@1: {correct / seen:.3f}")


def main():
    g = torch.Generator().manual_seed(0)
    n = 2560
    protos = torch.randn(10, 3, 8, 8, generator=g)
    y = torch.randint(0, 10, (n,), generator=g)
    x = protos[y] + 0.7 * torch.randn(n, 3, 8, 8, generator=g)
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True,
                        generator=torch.Generator().manual_seed(1))
    args = {"lr": 0.1, "momentum": 0.9, "sigma": 1.5, "max_per_sample_grad_norm": 10.0}
    torch.manual_seed(0)
    model = SmallConvNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=args["lr"], momentum=args["momentum"])
    for epoch in range(1, 3):
        train(args, model, loader, optimizer, epoch)


if __name__ == "__main__":
    main()
