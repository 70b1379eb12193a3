"""A DeepFM click-through model over Criteo-style (feature index, feature value) pairs: a first-order
embedding, an FM second-order term, a deep part of Linear + BatchNorm1d + ReLU + Dropout blocks
registered with setattr in __init__, and one Linear over the concatenated parts. Module-level helpers
train_model(model, batches, optimizer, epoch) (BCE with logits, clip_grad_norm_, Adam) and
test_model(model, batches) (model.eval(), no_grad, AUC and loss) are called once per epoch by
train_test_model_demo(). forward() applies the dropout on the FM outputs and on the deep input by
building a fresh module on the spot, nn.Dropout(p)(x); a module created inside forward is always in
training mode, so the deep input keeps dropping half of its units in test_model and the AUC and test
loss are measured on a randomly thinned network.

Thread: https://github.com/JianzhouZhan/Awesome-RecSystem-Models/issues/3
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

EPOCHS = 4
BATCH_SIZE = 256


class DeepFM(nn.Module):
    def __init__(self, num_feat, num_field, dropout_deep, dropout_fm, layer_sizes=(64, 64), embedding_size=8):
        super().__init__()
        self.num_field, self.embedding_size = num_field, embedding_size
        self.layer_sizes = list(layer_sizes)
        self.dropout_deep, self.dropout_fm = dropout_deep, dropout_fm
        self.first_weights = nn.Embedding(num_feat, 1)
        nn.init.xavier_uniform_(self.first_weights.weight)
        self.feat_embeddings = nn.Embedding(num_feat, embedding_size)
        nn.init.xavier_uniform_(self.feat_embeddings.weight)
        dims = [num_field * embedding_size] + self.layer_sizes
        for i in range(1, len(dims)):
            setattr(self, f"linear_{i}", nn.Linear(dims[i - 1], dims[i]))
            setattr(self, f"batchNorm_{i}", nn.BatchNorm1d(dims[i]))
            setattr(self, f"dropout_{i}", nn.Dropout(dropout_deep[i]))
        self.fc = nn.Linear(num_field + embedding_size + dims[-1], 1)

    def forward(self, feat_index, feat_value):
        feat_value = feat_value.unsqueeze(2)
        y_first = (self.first_weights(feat_index) * feat_value).sum(dim=2)
        y_first = nn.Dropout(self.dropout_fm[0])(y_first)

        emb = self.feat_embeddings(feat_index) * feat_value
        y_second = 0.5 * (emb.sum(1).pow(2) - emb.pow(2).sum(1))
        y_second = nn.Dropout(self.dropout_fm[1])(y_second)

        y_deep = emb.reshape(-1, self.num_field * self.embedding_size)
        y_deep = nn.Dropout(self.dropout_deep[0])(y_deep)
        for i in range(1, len(self.layer_sizes) + 1):
            y_deep = getattr(self, f"linear_{i}")(y_deep)
            y_deep = F.relu(getattr(self, f"batchNorm_{i}")(y_deep))
            y_deep = getattr(self, f"dropout_{i}")(y_deep)
        return self.fc(torch.cat([y_first, y_second, y_deep], dim=1))


def roc_auc(scores, labels):
    order = torch.argsort(scores)
    ranks = torch.empty(len(scores))
    ranks[order] = torch.arange(1, len(scores) + 1, dtype=torch.float)
    pos = labels == 1
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    return (ranks[pos].sum().item() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def iterate(data, shuffle, seed=0):
    idx, val, lab = data
    order = torch.randperm(len(lab), generator=torch.Generator().manual_seed(seed)) if shuffle else torch.arange(len(lab))
    for b in range(math.ceil(len(lab) / BATCH_SIZE)):
        sel = order[b * BATCH_SIZE:(b + 1) * BATCH_SIZE]
        yield idx[sel], val[sel], lab[sel]


def train_model(model, train_data, optimizer, epoch):
    model.train()
    for batch_idx, (idx, value, target) in enumerate(iterate(train_data, shuffle=True, seed=epoch)):
        optimizer.zero_grad()
        output = model(idx, value)
        loss = F.binary_cross_entropy_with_logits(output, target)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=100)
        optimizer.step()
        if batch_idx % 20 == 0:
            print(f"Train Epoch: {epoch} batch {batch_idx}\tLoss: {loss.item():.6f}")


def test_model(model, test_data):
    model.eval()
    pred_y, true_y, test_loss, n = [], [], 0.0, 0
    with torch.no_grad():
        for idx, value, target in iterate(test_data, shuffle=False):
            output = model(idx, value)
            test_loss += F.binary_cross_entropy_with_logits(output, target).item()
            n += 1
            pred_y.append(output.view(-1))
            true_y.append(target.view(-1))
    print(f"Roc AUC: {roc_auc(torch.cat(pred_y), torch.cat(true_y)):.5f}  Test loss: {test_loss / n:.5f}")


def make_criteo_like(n=16000, n_cont=4, n_cat=8, card=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    cont = torch.rand(n, n_cont, generator=g)
    cats = torch.randint(0, card, (n, n_cat), generator=g)
    cat_effect = 0.8 * torch.randn(n_cat, card, generator=g)
    pair = torch.randn(card, card, generator=g)
    logit = cat_effect.gather(1, cats.T).sum(0) + 1.2 * pair[cats[:, 0], cats[:, 1]] + 2 * (cont[:, 0] - 0.5) - 1.0
    label = (torch.rand(n, generator=g) < torch.sigmoid(logit)).float().unsqueeze(1)
    # one index per continuous field, then offset categorical indices; values 1.0 for categoricals
    feat_index = torch.cat([torch.arange(n_cont).expand(n, n_cont), n_cont + cats + card * torch.arange(n_cat)], 1)
    feat_value = torch.cat([cont, torch.ones(n, n_cat)], 1)
    cut = int(0.8 * n)
    train = (feat_index[:cut], feat_value[:cut], label[:cut])
    test = (feat_index[cut:], feat_value[cut:], label[cut:])
    return n_cont + n_cat * card, n_cont + n_cat, train, test


def train_test_model_demo(model, train_data, test_data):
    optimizer = torch.optim.Adam(model.parameters())
    for epoch in range(1, EPOCHS + 1):
        train_model(model, train_data, optimizer, epoch)
        test_model(model, test_data)


if __name__ == "__main__":
    torch.manual_seed(0)
    num_feat, num_field, train_data, test_data = make_criteo_like()
    deepfm = DeepFM(num_feat=num_feat, num_field=num_field, dropout_deep=[0.5, 0.5, 0.5], dropout_fm=[0, 0])
    train_test_model_demo(deepfm, train_data, test_data)
