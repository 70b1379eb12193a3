"""A config-driven BERT sentence classifier in the shape of a research library's
BertForClassification model: the model wraps a pretrained BERT, takes its pooled output, applies
dropout and a Linear layer, computes CrossEntropyLoss and a categorical accuracy metric inside
forward() and returns an output dict; a Trainer builds Adam over the parameters that require grad,
clips the gradient norm, runs the configured epochs over a bucketed iterator and reports
get_metrics() per epoch. The config asks for trainable=False (train only the final layer, keep the
pretrained encoder as it is), and the constructor implements it as
self.bert_model.requires_grad = trainable, which only sets an attribute on the module: every encoder
parameter keeps requires_grad=True, goes into the optimizer and is updated at the head's learning rate.

Thread: https://github.com/allenai/allennlp/pull/2932
"""
import torch
from torch import nn

VOCAB, SEQ, PAD, CLS = 50, 16, 0, 1
POSITIVE, NEGATIVE = range(2, 8), range(8, 14)

CONFIG = {
    "model": {"type": "bert_for_classification", "dropout": 0.0, "num_labels": 2, "trainable": False},
    "iterator": {"type": "bucket", "batch_size": 5},
    "trainer": {"optimizer": {"type": "adam", "lr": 0.001}, "num_epochs": 3, "grad_norm": 10.0},
}


class BertConfig:
    hidden_size = 32


class PretrainedBertModel(nn.Module):
    """Stand-in for a loaded pretrained BERT: returns (encoded_layers, pooled_output)."""

    def __init__(self):
        super().__init__()
        self.config = BertConfig()
        dim = self.config.hidden_size
        self.word_embeddings = nn.Embedding(VOCAB, dim, padding_idx=PAD)
        self.position_embeddings = nn.Embedding(SEQ, dim)
        self.token_type_embeddings = nn.Embedding(2, dim)
        layer = nn.TransformerEncoderLayer(dim, 4, 2 * dim, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.pooler = nn.Linear(dim, dim)

    @classmethod
    def load(cls, name):
        torch.manual_seed(1234)
        return cls()

    def forward(self, input_ids, token_type_ids, attention_mask):
        pos = torch.arange(input_ids.size(1))
        h = self.word_embeddings(input_ids) + self.position_embeddings(pos) + self.token_type_embeddings(token_type_ids)
        h = self.encoder(h, src_key_padding_mask=attention_mask == 0)
        return h, torch.tanh(self.pooler(h[:, 0]))


class CategoricalAccuracy:
    def __init__(self):
        self.correct = self.total = 0

    def __call__(self, logits, gold):
        self.correct += int((logits.argmax(-1) == gold).sum())
        self.total += len(gold)

    def get_metric(self, reset=False):
        value = self.correct / max(1, self.total)
        if reset:
            self.correct = self.total = 0
        return value


class BertForClassification(nn.Module):
    def __init__(self, bert_model, dropout=0.0, num_labels=None, index="bert", trainable=True):
        super().__init__()
        self.bert_model = PretrainedBertModel.load(bert_model) if isinstance(bert_model, str) else bert_model
        self.bert_model.requires_grad = trainable
        in_features = self.bert_model.config.hidden_size
        self._dropout = nn.Dropout(p=dropout)
        self._classification_layer = nn.Linear(in_features, num_labels)
        self._accuracy = CategoricalAccuracy()
        self._loss = nn.CrossEntropyLoss()
        self._index = index

    def forward(self, tokens, label=None):
        input_ids = tokens[self._index]
        token_type_ids = tokens[f"{self._index}-type-ids"]
        input_mask = (input_ids != 0).long()
        _, pooled = self.bert_model(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=input_mask)
        logits = self._classification_layer(self._dropout(pooled))
        output_dict = {"logits": logits, "probs": torch.softmax(logits, dim=-1)}
        if label is not None:
            output_dict["loss"] = self._loss(logits, label.long().view(-1))
            self._accuracy(logits, label)
        return output_dict

    def get_metrics(self, reset=False):
        return {"accuracy": self._accuracy.get_metric(reset)}


def read_instances(n, seed):
    """Reviews of 6-15 tokens; the label is which of the positive / negative word sets occurs more."""
    g = torch.Generator().manual_seed(seed)
    instances = []
    for _ in range(n):
        length = int(torch.randint(6, SEQ, (1,), generator=g))
        ids = torch.randint(14, VOCAB, (length,), generator=g)
        label = int(torch.randint(0, 2, (1,), generator=g))
        strong, weak = (POSITIVE, NEGATIVE) if label == 1 else (NEGATIVE, POSITIVE)
        slots = torch.randperm(length, generator=g)[:3]
        ids[slots[0]] = strong[int(torch.randint(0, 6, (1,), generator=g))]
        ids[slots[1]] = strong[int(torch.randint(0, 6, (1,), generator=g))]
        ids[slots[2]] = weak[int(torch.randint(0, 6, (1,), generator=g))]
        instances.append((torch.cat([torch.tensor([CLS]), ids]), label))
    return instances


def bucket_iterator(instances, batch_size, g):
    order = sorted(range(len(instances)), key=lambda i: len(instances[i][0]))
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    for b in torch.randperm(len(batches), generator=g).tolist():
        chunk = [instances[i] for i in batches[b]]
        width = max(len(t) for t, _ in chunk)
        ids = torch.full((len(chunk), width), PAD)
        for row, (t, _) in enumerate(chunk):
            ids[row, :len(t)] = t
        yield {"tokens": {"bert": ids, "bert-type-ids": torch.zeros_like(ids)},
               "label": torch.tensor([lab for _, lab in chunk])}


class Trainer:
    def __init__(self, model, train_data, validation_data, config):
        self.model, self.train_data, self.validation_data = model, train_data, validation_data
        self.config = config
        parameters = [[n, p] for n, p in model.named_parameters() if p.requires_grad]
        print(f"Number of trainable parameters: {sum(p.numel() for _, p in parameters)}")
        self.optimizer = torch.optim.Adam([p for _, p in parameters], lr=config["optimizer"]["lr"])
        self.g = torch.Generator().manual_seed(0)

    def train(self):
        batch_size = CONFIG["iterator"]["batch_size"]
        for epoch in range(self.config["num_epochs"]):
            self.model.train()
            total = batches = 0
            for batch in bucket_iterator(self.train_data, batch_size, self.g):
                self.optimizer.zero_grad()
                loss = self.model(**batch)["loss"]
                loss.backward()
                nn.utils.clip_grad_norm_([p for p in self.model.parameters() if p.requires_grad],
                                         self.config["grad_norm"])
                self.optimizer.step()
                total, batches = total + loss.item(), batches + 1
            train_acc = self.model.get_metrics(reset=True)["accuracy"]
            self.model.eval()
            with torch.no_grad():
                for batch in bucket_iterator(self.validation_data, 50, self.g):
                    self.model(**batch)
            val_acc = self.model.get_metrics(reset=True)["accuracy"]
            print(f"epoch {epoch} loss {total / batches:.4f} accuracy {train_acc:.3f} validation_accuracy {val_acc:.3f}")


if __name__ == "__main__":
    torch.manual_seed(0)
    params = dict(CONFIG["model"])
    params.pop("type")
    model = BertForClassification("bert-base-uncased", **params)
    Trainer(model, read_instances(400, 0), read_instances(200, 1), CONFIG["trainer"]).train()
