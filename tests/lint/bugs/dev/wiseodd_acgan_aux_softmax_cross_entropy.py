"""
Shape: flat module-level script with torch.nn.functional imported under the name nn; generator and discriminator as torch.nn.Sequential pieces (shared trunk, D_gan head ending in Sigmoid, D_aux head ending in Softmax) wrapped by plain functions G(z, c) and D(X); two Adams over hand-collected parameter lists, reset_grad() zeroing every net, one loop doing a D/aux step then a G/aux step with hand-written log losses.
Bug: D_aux ends in torch.nn.Softmax(), and its probabilities are passed to nn.cross_entropy (functional cross_entropy), which applies log_softmax again.
Thread: https://github.com/wiseodd/generative-models/issues/20
"""
import numpy as np
import torch
import torch.nn.functional as nn
import torch.optim as optim
from torch.autograd import Variable
from tensorflow.examples.tutorials.mnist import input_data

mnist = input_data.read_data_sets("../../MNIST_data", one_hot=True)
batch = 32
z_dim = 16
x_dim = mnist.train.images.shape[1]
n_cls = mnist.train.labels.shape[1]
hidden = 128
lr = 1e-3
eps = 1e-8

G_ = torch.nn.Sequential(
    torch.nn.Linear(z_dim + n_cls, hidden),
    torch.nn.PReLU(),
    torch.nn.Linear(hidden, x_dim),
    torch.nn.Sigmoid(),
)


def G(z, c):
    return G_(torch.cat([z, c], 1))


D_shared = torch.nn.Sequential(torch.nn.Linear(x_dim, hidden), torch.nn.PReLU())
D_gan = torch.nn.Sequential(torch.nn.Linear(hidden, 1), torch.nn.Sigmoid())
D_aux = torch.nn.Sequential(torch.nn.Linear(hidden, n_cls), torch.nn.Softmax())


def D(X):
    h = D_shared(X)
    return D_gan(h), D_aux(h)


nets = [G_, D_shared, D_gan, D_aux]
G_params = G_.parameters()
D_params = list(D_shared.parameters()) + list(D_gan.parameters()) + list(D_aux.parameters())


def reset_grad():
    for net in nets:
        net.zero_grad()


G_solver = optim.Adam(G_params, lr=lr)
D_solver = optim.Adam(D_params, lr=lr)

for it in range(100000):
    X, y = mnist.train.next_batch(batch)
    X = Variable(torch.from_numpy(X))
    c = Variable(torch.from_numpy(y.astype("float32")))
    y_idx = Variable(torch.from_numpy(y.argmax(axis=1).astype("int")))
    z = Variable(torch.randn(batch, z_dim))

    fake = G(z, c)
    D_real, C_real = D(X)
    D_fake, C_fake = D(fake)
    D_loss = torch.mean(torch.log(D_real + eps) + torch.log(1 - D_fake + eps))
    C_loss = -nn.cross_entropy(C_real, y_idx) - nn.cross_entropy(C_fake, y_idx)
    DC_loss = -(D_loss + C_loss)
    DC_loss.backward()
    D_solver.step()
    reset_grad()

    fake = G(z, c)
    D_fake, C_fake = D(fake)
    _, C_real = D(X)
    G_loss = torch.mean(torch.log(D_fake + eps))
    C_loss = -nn.cross_entropy(C_real, y_idx) - nn.cross_entropy(C_fake, y_idx)
    GC_loss = -(G_loss + C_loss)
    GC_loss.backward()
    G_solver.step()
    reset_grad()

    if it % 1000 == 0:
        pick = np.random.randint(0, 10)
        cond = np.zeros([16, n_cls])
        cond[range(16), pick] = 1
        samples = G(Variable(torch.randn(16, z_dim)), Variable(torch.from_numpy(cond.astype("float32")))).data.numpy()
