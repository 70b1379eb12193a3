"""
Shape: LightningModule cross-encoder (AutoModel + linear head) with self.ce = CrossEntropyLoss set in __init__; training_step uses raw scores, validation_step and test_step softmax the scores first and reuse them for loss and metrics.
Bug: validation_step/test_step pass torch.softmax(scores, dim=1) to self.ce (CrossEntropyLoss), so the validation loss is computed on probabilities and stalls near 0.74+.
Thread: https://github.com/ariecattan/SciCo/issues/2
"""
import pytorch_lightning as pl
import torch
import torch.nn as nn
from transformers import AutoModel, AutoTokenizer


class PairRelationEncoder(pl.LightningModule):
    def __init__(self, cfg, n_labels=4):
        super(PairRelationEncoder, self).__init__()
        self.config = cfg
        self.tokenizer = AutoTokenizer.from_pretrained(cfg["model"]["bert_model"])
        self.tokenizer.add_tokens(["<m>", "</m>"], special_tokens=True)
        self.backbone = AutoModel.from_pretrained(cfg["model"]["bert_model"], add_pooling_layer=False)
        self.backbone.resize_token_embeddings(len(self.tokenizer))
        self.cls_head = nn.Linear(self.backbone.config.hidden_size, n_labels)
        self.ce = nn.CrossEntropyLoss()
        self.accuracy = pl.metrics.Accuracy(top_k=1)
        self.f1_score = pl.metrics.F1(num_classes=n_labels, average="none")

    def forward(self, tok_ids, attn_mask, glob_mask):
        out = self.backbone(tok_ids, attention_mask=attn_mask,
                            global_attention_mask=glob_mask)
        cls_repr = out.last_hidden_state[:, 0, :]
        return self.cls_head(cls_repr)

    def training_step(self, pair_batch, step_idx):
        x, y = pair_batch
        tok_ids, attn_mask, glob_mask = x
        scores = self(tok_ids, attn_mask, glob_mask)
        return self.ce(scores, y)

    def validation_step(self, pair_batch, step_idx):
        x, y = pair_batch
        tok_ids, attn_mask, glob_mask = x
        scores = self(tok_ids, attn_mask, glob_mask)
        scores = torch.softmax(scores, dim=1)
        loss = self.ce(scores, y)
        self.compute_metrics(scores, y)
        self.log("val_loss", loss, on_step=False, on_epoch=True)
        return loss

    def test_step(self, pair_batch, step_idx):
        x, y = pair_batch
        tok_ids, attn_mask, glob_mask = x
        scores = self(tok_ids, attn_mask, glob_mask)
        scores = torch.softmax(scores, dim=1)
        loss = self.ce(scores, y)
        return {"loss": loss, "preds": scores, "label": y}

    def update_metrics(self, scores, y):
        self.accuracy(scores, y)
        self.f1_score(scores, y)

    def configure_optimizers(self):  # single AdamW over all weights
        lr = self.config["model"]["lr"]
        return torch.optim.AdamW(self.parameters(), lr=lr)
