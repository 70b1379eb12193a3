"""A documentation example for a second-order optimizer: a small conv net (nn.Sequential of two
conv/ReLU/max-pool blocks, Flatten and two Linear layers) on digit-like images, trained by a custom
torch.optim.Optimizer subclass, DiagGGNOptimizer, whose step() divides each gradient by a diagonal
Gauss-Newton estimate plus a constant damping (p.grad / (p.diag_ggn_mc + damping)). A backward helper
fills p.diag_ggn_mc (a Monte Carlo diagonal GGN, recomputed from scratch on every backward) next to
.grad. The loop over the loader does forward, loss, backward with the curvature, optimizer.step() and
logging, for up to MAX_ITER iterations, but never zeroes the gradients: .grad keeps the sum of every
gradient since the start while the curvature is fresh each step, so the preconditioned steps grow and
the run drifts away instead of converging.

Thread: https://github.com/f-dangel/backpack/issues/95
"""
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

BATCH_SIZE = 64
STEP_SIZE = 0.01
DAMPING = 1.0
MAX_ITER = 200
PRINT_EVERY = 25
torch.manual_seed(0)


def make_digit_loader(n_batches, batch_size, seed=0):
    protos = torch.randn(10, 1, 16, 16, generator=torch.Generator().manual_seed(7))
    g = torch.Generator().manual_seed(seed)
    for _ in range(n_batches):
        y = torch.randint(0, 10, (batch_size,), generator=g)
        x = protos[y] + 0.8 * torch.randn(batch_size, 1, 16, 16, generator=g)
        yield x, y


model = nn.Sequential(
    nn.Conv2d(1, 8, 5, 1),
    nn.ReLU(),
    nn.MaxPool2d(2, 2),
    nn.Conv2d(8, 16, 3, 1),
    nn.ReLU(),
    nn.MaxPool2d(2, 2),
    nn.Flatten(),
    nn.Linear(16 * 2 * 2, 64),
    nn.ReLU(),
    nn.Linear(64, 10),
)
loss_function = nn.CrossEntropyLoss()


def get_accuracy(output, targets):
    predictions = output.argmax(dim=1, keepdim=True).view_as(targets)
    return predictions.eq(targets).float().mean().item()


def backward_with_diag_ggn_mc(net, x, loss):
    """loss.backward(), and store a one-sample Monte Carlo diagonal GGN in p.diag_ggn_mc."""
    loss.backward()
    params = {k: v.detach() for k, v in net.named_parameters()}

    def sampled_nll(p, xi):
        logits = functional_call(net, p, (xi.unsqueeze(0),))
        with torch.no_grad():
            y_hat = torch.distributions.Categorical(logits=logits).sample()
        return nn.functional.cross_entropy(logits, y_hat)

    per_sample = vmap(grad(sampled_nll), in_dims=(None, 0), randomness="different")(params, x)
    for name, p in net.named_parameters():
        p.diag_ggn_mc = per_sample[name].pow(2).sum(0) / x.shape[0]


class DiagGGNOptimizer(torch.optim.Optimizer):
    def __init__(self, parameters, step_size, damping):
        super().__init__(parameters, dict(step_size=step_size, damping=damping))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                direction = p.grad / (p.diag_ggn_mc + group["damping"])
                p.add_(direction, alpha=-group["step_size"])


optimizer = DiagGGNOptimizer(model.parameters(), step_size=STEP_SIZE, damping=DAMPING)

losses = []
accuracies = []
for batch_idx, (x, y) in enumerate(make_digit_loader(MAX_ITER + 2, BATCH_SIZE)):
    outputs = model(x)
    loss = loss_function(outputs, y)

    backward_with_diag_ggn_mc(model, x, loss)

    optimizer.step()

    losses.append(loss.detach().item())
    accuracies.append(get_accuracy(outputs, y))

    if batch_idx % PRINT_EVERY == 0:
        print(f"Iteration {batch_idx:3d}/{MAX_ITER} Minibatch Loss {losses[-1]:.3f}  Accuracy {accuracies[-1]:.3f}")

    if MAX_ITER is not None and batch_idx > MAX_ITER:
        break

print(f"final loss {sum(losses[-20:]) / 20:.3f} accuracy {sum(accuracies[-20:]) / 20:.3f}")
