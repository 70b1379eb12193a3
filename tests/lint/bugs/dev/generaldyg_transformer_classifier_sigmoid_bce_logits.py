"""
Shape: a dynamic-graph anomaly-detection script: a TransformerBinaryClassifier module (encoder layers over the GNN output, masked mean pooling, a Linear classifier and an nn.Sigmoid stored on self) is combined with a CensNet GNN in a CombinedModel wrapper; a module-level criterion(logits, labels) helper computes F.binary_cross_entropy_with_logits with reduction='none' and averages it; the flat script builds Adam over the combined model's parameters and two DataLoaders with a custom collate function, runs a tqdm batch loop, and an eval_epoch(dataset, model, config, device) helper reports loss and ROC-AUC per epoch with early stopping.
Bug: TransformerBinaryClassifier.forward returns sigmoid(classifier(...)), and criterion passes those probabilities to binary_cross_entropy_with_logits, which applies a second sigmoid.
Thread: https://github.com/YXNTU/GeneralDyG/issues/6
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data
from sklearn.metrics import roc_auc_score
from tqdm import tqdm

import datasets as dyg_data
from model.CensNet import CensNet
from model.Combine import CombinedModel
from option import args
from utils import EarlyStopMonitor


class TransformerBinaryClassifier(nn.Module):
    def __init__(self, config, device, hidden_size=128):
        super().__init__()
        self.device = device
        layer = nn.TransformerEncoderLayer(d_model=hidden_size, nhead=config.n_heads,
                                           dropout=config.drop_out, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=config.n_layer)
        self.classifier = nn.Linear(hidden_size, 1)
        self.sigmoid = nn.Sigmoid()

    def forward(self, raw_input, gnn_out, mask):
        h = self.encoder(gnn_out + raw_input, src_key_padding_mask=mask)
        keep = (~mask).unsqueeze(-1).float()
        pooled = (h * keep).sum(1) / keep.sum(1).clamp(min=1.0)
        scores = self.classifier(pooled)
        return self.sigmoid(scores).squeeze()


def criterion(logits, labels):
    per_item = F.binary_cross_entropy_with_logits(logits, labels, reduction="none")
    return torch.mean(per_item)


def move(batch, device):
    feats = [t.to(device) for t in batch["input_nodes_feature"]]
    efeats = [t.to(device) for t in batch["input_edges_feature"]]
    tmats = [t.to(device) for t in batch["Tmats"]]
    adjs = [t.to(device) for t in batch["adjs"]]
    eadjs = [t.to(device) for t in batch["eadjs"]]
    return feats, efeats, batch["input_edges_pad"].to(device), eadjs, adjs, tmats, batch["mask_edge"].to(device)


def eval_epoch(loader, model, config, device):
    losses, preds, gold = [], [], []
    with torch.no_grad():
        model.eval()
        for batch in loader:
            out = model(*move(batch, device))
            y = batch["labels"].to(device).float()
            losses.append(criterion(out, y).item())
            preds.append(out.cpu().numpy().ravel())
            gold.append(y.cpu().numpy().ravel())
    return float(np.mean(losses)), roc_auc_score(np.concatenate(gold), np.concatenate(preds))


config = args
device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
train_set = dyg_data.DygDataset(config, "train")
test_set = dyg_data.DygDataset(config, "test")
collate = dyg_data.Collate(config)

gnn = CensNet(config.input_dim, config.drop_out)
head = TransformerBinaryClassifier(config, device, hidden_size=config.hidden_dim)
model = CombinedModel(gnn, head).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate)

train_loader = torch.utils.data.DataLoader(train_set, batch_size=config.batch_size, shuffle=True,
                                           num_workers=config.num_data_workers, pin_memory=True,
                                           collate_fn=collate.dyg_collate_fn)
test_loader = torch.utils.data.DataLoader(test_set, batch_size=config.batch_size, shuffle=True,
                                          num_workers=config.num_data_workers,
                                          collate_fn=collate.dyg_collate_fn)

best_auc = 0.0
stopper = EarlyStopMonitor(higher_better=True)
for epoch in range(config.n_epochs):
    with tqdm(total=len(train_loader)) as bar:
        for batch in train_loader:
            optimizer.zero_grad()
            model.train()
            out = model(*move(batch, device))
            loss = criterion(out, batch["labels"].to(device).float())
            loss.backward()
            optimizer.step()
            bar.set_postfix(loss=loss.item())
            bar.update(1)
    val_loss, val_auc = eval_epoch(test_loader, model, config, device)
    print("epoch", epoch, "val loss", val_loss, "val auc", val_auc)
    best_auc = max(best_auc, val_auc)
    if stopper.early_stop_check(val_auc):
        break
print("best auc:", best_auc)
