"""
Shape: ModelManager class (BERT model, BertAdam with no-decay groups built in get_optimizer, prototypes kept on self); train(args, data) builds prototypes with k-means, then per batch computes a prototype-assignment loss plus a cross-entropy loss on a labeled batch drawn from an iterator, backward/step/zero_grad.
Bug: the prototype soft-assignment F.softmax(sim_mat, dim=0) over a (batch, n_prototypes) similarity matrix normalises across the batch instead of across prototypes.
Thread: https://github.com/Lackel/DPN/issues/1
"""
import math
import os
import random

import numpy as np
import torch
import torch.nn.functional as F
from pytorch_pretrained_bert.optimization import BertAdam
from scipy.optimize import linear_sum_assignment
from scipy.spatial import distance as dist
from sklearn.cluster import KMeans
from torch.utils.data import DataLoader, SequentialSampler, TensorDataset

from data import Data
from init_parameter import init_model
from model import BertForModel


class ModelManager:
    def __init__(self, args, data, pretrained_model=None):
        torch.manual_seed(args.seed)
        np.random.seed(args.seed)
        random.seed(args.seed)
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.num_labels = data.num_labels
        self.model = BertForModel(args, self.num_labels)
        if pretrained_model is not None:
            state = {k: v for k, v in pretrained_model.state_dict().items() if not k.startswith("classifier.")}
            self.model.load_state_dict(state, strict=False)
        self.model.to(self.device)
        n_examples = 2 * len(data.train_labeled_examples) + 2 * len(data.train_unlabeled_examples)
        self.num_training_steps = math.ceil(n_examples / args.train_batch_size) * 100
        self.optimizer = self.get_optimizer(args)
        self.centroids = None

    def get_features_labels(self, dataloader, model, args):
        model.eval()
        feats = torch.empty((0, args.feat_dim)).to(self.device)
        labels = torch.empty(0, dtype=torch.long).to(self.device)
        for batch in dataloader:
            input_ids, input_mask, segment_ids, label_ids = tuple(t.to(self.device) for t in batch)
            with torch.no_grad():
                out = model(input_ids, segment_ids, input_mask, mode="feature_extract")
            feats = torch.cat((feats, out))
            labels = torch.cat((labels, label_ids))
        return feats, labels

    def get_optimizer(self, args):
        named = list(self.model.named_parameters())
        skip = ["bias", "LayerNorm.bias", "LayerNorm.weight"]
        groups = [
            {"params": [p for n, p in named if not any(s in n for s in skip)], "weight_decay": 0.01},
            {"params": [p for n, p in named if any(s in n for s in skip)], "weight_decay": 0.0},
        ]
        return BertAdam(groups, lr=args.lr, warmup=args.warmup_proportion, t_total=self.num_training_steps)

    def alignment(self, km, args):
        new_centers = km.cluster_centers_
        if self.centroids is None:
            self.centroids = torch.tensor(new_centers).to(self.device)
            return torch.tensor(km.labels_, dtype=torch.long).to(self.device)
        old = self.centroids.cpu().numpy()
        gaps = np.linalg.norm(old[:, np.newaxis, :] - new_centers[np.newaxis, :, :], axis=2)
        _, cols = linear_sum_assignment(gaps)
        self.centroids = torch.tensor(new_centers[cols]).to(self.device)
        remap = {lab: i for i, lab in enumerate(cols)}
        pseudo = np.array([remap[lab] for lab in km.labels_])
        return torch.tensor(pseudo, dtype=torch.long).to(self.device)

    def update_cluster_ids(self, pseudo_labels, args, data):
        ds = TensorDataset(data.semi_input_ids, data.semi_input_mask, data.semi_segment_ids, pseudo_labels)
        return DataLoader(ds, sampler=SequentialSampler(ds), batch_size=args.train_batch_size)

    def pairwise_cosine_dist(self, x, y):
        return 1 - torch.matmul(F.normalize(x, p=2, dim=1), F.normalize(y, p=2, dim=1).T)

    def euclidean_distances(self, a, b):
        aa = torch.sum(a ** 2, dim=1).unsqueeze(1)
        bb = torch.sum(b ** 2, dim=1).unsqueeze(0)
        return torch.sqrt(aa + bb - 2 * a.mm(b.t()))

    def train(self, args, data):
        lab_feats, lab_y = self.get_features_labels(data.train_labeled_dataloader, self.model, args)
        lab_feats, lab_y = lab_feats.cpu().numpy(), lab_y.cpu().numpy()
        proto_l = np.zeros((data.n_known_cls, args.feat_dim))
        counts = np.zeros(data.n_known_cls)
        for r in range(lab_feats.shape[0]):
            proto_l[lab_y[r]] += lab_feats[r]
            counts[lab_y[r]] += 1
        for c in range(data.n_known_cls):
            proto_l[c] = proto_l[c] / counts[c]
        feats, _ = self.get_features_labels(data.train_semi_dataloader, self.model, args)
        km = KMeans(n_clusters=self.num_labels, n_init=20).fit(feats.cpu().numpy())
        centers = km.cluster_centers_
        _, cols = linear_sum_assignment(dist.cdist(proto_l, centers, "euclidean"))
        ordered = [centers[c] for c in cols] + [centers[j] for j in range(data.num_labels) if j not in cols]
        self.proto_u = torch.tensor(np.array(ordered)).to(self.device)
        self.centroids = self.proto_u
        pseudo = self.alignment(km, args)
        train_loader = self.update_cluster_ids(pseudo, args, data)
        labeled_iter = iter(data.train_labeled_dataloader)
        self.proto_l = proto_l

        for epoch in range(1, int(args.num_train_epochs) + 1):
            lab_feats, lab_y = self.get_features_labels(data.train_labeled_dataloader, self.model, args)
            lab_feats, lab_y = lab_feats.cpu().numpy(), lab_y.cpu().numpy()
            fresh = np.zeros((data.n_known_cls, args.feat_dim))
            counts = np.zeros(data.n_known_cls)
            for r in range(lab_feats.shape[0]):
                fresh[lab_y[r]] += lab_feats[r]
                counts[lab_y[r]] += 1
            for c in range(data.n_known_cls):
                fresh[c] = fresh[c] / counts[c]
            self.proto_l = args.momentum_factor * self.proto_l + (1 - args.momentum_factor) * fresh
            running = 0.0
            steps = 0
            self.model.train()
            for batch in train_loader:
                input_ids, input_mask, segment_ids, label_ids = tuple(t.to(self.device) for t in batch)
                pooled = self.model(input_ids, segment_ids, input_mask, label_ids, mode="feature_extract")

                sim_u = torch.matmul(pooled, self.proto_u.T) / args.temperature
                assign_u = F.softmax(sim_u, dim=0)
                loss_u = (self.euclidean_distances(pooled, self.proto_u) * assign_u).sum(0).mean()

                known = torch.where(label_ids < len(self.proto_l), 1, 0).reshape((-1, 1))
                proto_l_t = torch.tensor(self.proto_l).float().cuda()
                sim_l = torch.matmul(pooled, proto_l_t.T) / args.temperature
                assign_l = F.softmax(sim_l, dim=0)
                loss_l = (self.pairwise_cosine_dist(pooled, proto_l_t) * assign_l * known).sum(0).mean()
                loss_proto = loss_u + args.gamma * loss_l

                try:
                    lbatch = next(labeled_iter)
                except StopIteration:
                    labeled_iter = iter(data.train_labeled_dataloader)
                    lbatch = next(labeled_iter)
                input_ids, input_mask, segment_ids, label_ids = tuple(t.to(self.device) for t in lbatch)
                loss_ce, _ = self.model(input_ids, segment_ids, input_mask, label_ids, mode="train")

                loss = loss_proto + loss_ce
                loss.backward()
                running += loss.item()
                steps += 1
                self.optimizer.step()
                self.optimizer.zero_grad()


if __name__ == "__main__":
    args = init_model().parse_args()
    data = Data(args)
    manager = ModelManager(args, data, None)
    manager.train(args, data)
