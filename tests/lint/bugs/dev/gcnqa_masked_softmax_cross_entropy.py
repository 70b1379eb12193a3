"""
Shape: TransformerGCNQA nn.Module (BERT query encoder object, dense query-aware mention encoder, shared RGCNConv applied n times, fc_3..fc_5 scoring head, a LogSoftmax(dim=0) attribute) whose forward takes the max logit per candidate and computes the loss itself when a target is given; train_utils.train(model, optimizer, processed_dataset, dataloaders, **kwargs) accumulates batch_size single-example losses (divided by batch_size) before clipping and stepping; a cli main builds Adam and calls train.
Bug: forward turns the per-candidate scores into probabilities with torch.exp(self.log_softmax(...)) and passes those probabilities to nn.CrossEntropyLoss, which applies log_softmax again.
Thread: https://github.com/bowang-lab/Transformer-GCN-QA/pull/32
"""
import torch
from torch import nn
from torch.optim import Adam
from torch_geometric.nn import RGCNConv

from src.constants import TRAIN_SIZE_THRESHOLD
from src.utils import model_utils
from src.utils.dataset_utils import get_dataloaders, load_preprocessed_wikihop
from src.utils.model_utils import BERT, get_device


class TransformerGCNQA(nn.Module):
    def __init__(self, nlp=None, dropout_rate=0.1, n_rgcn_layers=3, n_rels=3, rgcn_size=128, n_rgcn_bases=2, **kwargs):
        super().__init__()
        self.nlp = nlp
        self.bert = BERT()
        self.n_rgcn_layers = n_rgcn_layers
        self.fc_1 = nn.Linear(1536, 786)
        self.fc_2 = nn.Linear(786, rgcn_size)
        self.leaky_relu = nn.LeakyReLU()
        self.dropout = nn.Dropout(dropout_rate)
        self.rgcn_layer = RGCNConv(rgcn_size, rgcn_size, n_rels, n_rgcn_bases)
        self.fc_3 = nn.Linear(rgcn_size + 768, 256)
        self.fc_4 = nn.Linear(256, 128)
        self.fc_5 = nn.Linear(128, 1)
        self.log_softmax = nn.LogSoftmax(dim=0)
        self.device, _ = get_device(self)

    def encode_query(self, query):
        svo = model_utils.preprocess_query(query)
        tokens = [t.text for t in self.nlp(svo)]
        encoding, _, _ = self.bert.predict_on_tokens([tokens])
        return encoding

    def encode_query_aware_mentions(self, encoded_query, encoded_mentions):
        n = encoded_mentions.shape[0]
        both = torch.cat((encoded_query.expand(n, -1), encoded_mentions), dim=-1)
        h = self.dropout(self.leaky_relu(self.fc_1(both)))
        return self.dropout(self.leaky_relu(self.fc_2(h)))

    def forward(self, query, candidate_indices, encoded_mention, graph, target=None):
        encoded_query = self.encode_query(query)
        x = self.encode_query_aware_mentions(encoded_query, encoded_mention)
        edge_index = graph[[0, 1], :]
        edge_type = graph[2, :]
        summed = torch.zeros_like(x)
        for _ in range(self.n_rgcn_layers):
            x = self.rgcn_layer(x, edge_index, edge_type)
            summed += x
        h = torch.cat([summed, encoded_query.expand((len(summed), -1))], dim=-1)
        logits = self.dropout(self.fc_3(h))
        logits = self.dropout(self.fc_4(logits))
        logits = self.dropout(self.fc_5(logits))

        masked_max = torch.zeros(len(candidate_indices)).to(self.device)
        for i, idxs in enumerate(candidate_indices.values()):
            if idxs:
                masked_max[i] = torch.max(logits[idxs])
        masked_softmax = torch.exp(self.log_softmax(masked_max))

        if target is not None:
            loss_fct = nn.CrossEntropyLoss()
            class_index = torch.argmax(target, 1)
            loss = loss_fct(masked_softmax.view(-1, len(candidate_indices)), class_index)
            return masked_softmax, loss
        return masked_softmax


def train(model, optimizer, processed_dataset, dataloaders, **kwargs):
    device, _ = get_device(model)
    processed_dataset = {p: list(processed_dataset[p].values()) for p in processed_dataset}
    for epoch in range(kwargs["epochs"]):
        model.train()
        optimizer.zero_grad()
        batch_idx = 0
        for i, (index, encoded_mentions, graph, target) in enumerate(dataloaders["train"]):
            index = index.item()
            encoded_mentions = encoded_mentions.to(device).squeeze(0)
            graph = graph.to(device).squeeze(0)
            target = target.to(device)
            if graph.shape[-1] == 0 or graph.shape[-1] >= TRAIN_SIZE_THRESHOLD:
                continue
            sample = processed_dataset["train"][index]
            _, loss = model(sample["query"], sample["candidate_indices"], encoded_mentions, graph, target)
            loss /= kwargs["batch_size"]
            loss.backward()
            if (batch_idx + 1) % kwargs["batch_size"] == 0 or i == len(dataloaders["train"]):
                if kwargs["grad_norm"]:
                    torch.nn.utils.clip_grad_norm_(parameters=model.parameters(), max_norm=kwargs["grad_norm"])
                optimizer.step()
                optimizer.zero_grad()
            batch_idx += 1


def main(**kwargs):
    processed_dataset, encoded_mentions, graphs, targets = load_preprocessed_wikihop(kwargs["input"])
    dataloaders = get_dataloaders(processed_dataset, encoded_mentions, graphs, targets)
    model = TransformerGCNQA(**kwargs)
    optimizer = Adam(model.parameters(), lr=kwargs["learning_rate"])
    train(model, optimizer, processed_dataset, dataloaders, **kwargs)
