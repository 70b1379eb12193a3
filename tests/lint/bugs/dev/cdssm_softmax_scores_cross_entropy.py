"""
Shape: single script; ConvDSSM(nn.Module) scores a query against one positive and J negative documents, scales the cosine dots with a 1x1 Conv1d and returns them; random tensors as data; CrossEntropyLoss + SGD loop over samples with target index 0.
Bug: forward() ends with F.softmax(scaled) and returns the probabilities, which are reshaped and passed to torch.nn.CrossEntropyLoss (softmax applied twice).
Thread: https://github.com/nishnik/Deep-Semantic-Similarity-Model-PyTorch/issues/2
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.autograd as autograd

GRAM_DIM = 3 * 30000
N_FILTERS = 300
SEM_DIM = 128
N_NEG = 4
KSIZE = 1


def kmax_pooling(x, dim, k):
    idx = x.topk(k, dim=dim)[1].sort(dim=dim)[0]
    return x.gather(dim, idx)


class ConvDSSM(nn.Module):
    def __init__(self):
        super(ConvDSSM, self).__init__()
        self.q_conv = nn.Conv1d(GRAM_DIM, N_FILTERS, KSIZE)
        self.q_proj = nn.Linear(N_FILTERS, SEM_DIM)
        self.d_conv = nn.Conv1d(GRAM_DIM, N_FILTERS, KSIZE)
        self.d_proj = nn.Linear(N_FILTERS, SEM_DIM)
        self.gamma_conv = nn.Conv1d(1, 1, 1)

    def encode_doc(self, doc):
        doc = doc.transpose(1, 2)
        pooled = kmax_pooling(torch.tanh(self.d_conv(doc)), 2, 1).transpose(1, 2)
        return torch.tanh(self.d_proj(pooled)).resize(SEM_DIM)

    def forward(self, q, pos, negs):
        q = q.transpose(1, 2)
        q_pool = kmax_pooling(torch.tanh(self.q_conv(q)), 2, 1).transpose(1, 2)
        q_sem = torch.tanh(self.q_proj(q_pool)).resize(SEM_DIM)

        pos_sem = self.encode_doc(pos)
        neg_sems = [self.encode_doc(n) for n in negs]

        sims = [q_sem.dot(pos_sem)] + [q_sem.dot(n) for n in neg_sems]
        sims = torch.stack(sims)
        scaled = self.gamma_conv(sims.resize(N_NEG + 1, 1, 1))
        prob = F.softmax(scaled)
        return prob


model = ConvDSSM()

n_samples = 10
queries, positives = [], []
for i in range(n_samples):
    queries.append(autograd.Variable(torch.from_numpy(np.random.rand(1, np.random.randint(1, 10), GRAM_DIM)).float()))
    positives.append(autograd.Variable(torch.from_numpy(np.random.rand(1, np.random.randint(50, 500), GRAM_DIM)).float()))
negatives = [[positives[(i + j + 1) % n_samples] for i in range(n_samples)] for j in range(N_NEG)]

xent = nn.CrossEntropyLoss()
sgd = torch.optim.SGD(model.parameters(), momentum=0.9, lr=1e-4)

target = autograd.Variable(torch.from_numpy(np.zeros(1)).long())

for i in range(n_samples):
    y_pred = model(queries[i], positives[i], [negatives[j][i] for j in range(N_NEG)])
    loss = xent(y_pred.resize(1, N_NEG + 1), target)
    sgd.zero_grad()
    loss.backward()
    sgd.step()
