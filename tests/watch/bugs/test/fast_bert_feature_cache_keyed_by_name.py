"""A fast-bert style pipeline: a BertDataBunch built from a data folder (train and val tables with
text and label columns, a labels table) that turns examples into InputFeatures (token ids, mask,
label id) with convert_examples_to_features and stores them in data_dir/cache under the name
cached_{model_type}_{set_type}_{multi_class}_{max_seq_length}; get_dataset_from_examples loads
that file whenever it exists. A BertLearner-like class fits a classifier on databunch.train_dl,
validates on databunch.val_dl, and predict_batch() tokenizes raw texts without the cache.

The cache key holds only the model type, split, label mode and max length, not the data or the
labels. Here the folder was first used with an earlier labelling; the user then fixed the
labels and retrained, but the second BertDataBunch finds the cached files and loads the old
features, so the new run trains and validates on the old labels: validation accuracy looks
fine while predictions disagree with the corrected labels. (The data folder is an in-memory
stand-in, so nothing is written to disk.)

Thread: https://github.com/appvision-ai/fast-bert/issues/114
"""
import copy
import os

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, RandomSampler, SequentialSampler, TensorDataset

# in-memory stand-in for the data folder on disk (path -> object)
_DISK = {}


def disk_exists(path):
    return path in _DISK


def disk_save(obj, path):
    _DISK[path] = copy.deepcopy(obj)


def disk_load(path):
    return copy.deepcopy(_DISK[path])


class InputExample:
    def __init__(self, guid, text_a, label=None):
        self.guid, self.text_a, self.label = guid, text_a, label


class InputFeatures:
    def __init__(self, input_ids, input_mask, label_id):
        self.input_ids, self.input_mask, self.label_id = input_ids, input_mask, label_id


class WordTokenizer:
    def __init__(self, vocab_size=400):
        self.vocab_size = vocab_size

    def tokenize(self, text):
        return text.split()

    def convert_tokens_to_ids(self, tokens):
        return [1 + (int(t[1:]) % (self.vocab_size - 1)) for t in tokens]


def convert_examples_to_features(examples, label_list, max_seq_length, tokenizer):
    label_map = {label: i for i, label in enumerate(label_list)}
    features = []
    for ex in examples:
        ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(ex.text_a))[:max_seq_length]
        mask = [1] * len(ids)
        pad = max_seq_length - len(ids)
        ids, mask = ids + [0] * pad, mask + [0] * pad
        label_id = label_map[ex.label] if ex.label is not None else 0
        features.append(InputFeatures(ids, mask, label_id))
    return features


class TextProcessor:
    def __init__(self, data_dir):
        self.data_dir = data_dir

    def get_examples(self, table, set_type, text_col="text", label_col="label"):
        return [InputExample(f"{set_type}-{i}", row[text_col], row[label_col]) for i, row in enumerate(table)]

    def get_labels(self, labels_table):
        return list(labels_table)


class BertDataBunch:
    def __init__(self, data_dir, tables, tokenizer, batch_size_per_gpu=16, max_seq_length=24,
                 multi_label=False, model_type="bert", no_cache=False):
        self.data_dir = data_dir
        self.cache_dir = os.path.join(data_dir, "cache")
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.batch_size_per_gpu = batch_size_per_gpu
        self.multi_label = multi_label
        self.model_type = model_type
        self.no_cache = no_cache
        processor = TextProcessor(data_dir)
        self.labels = processor.get_labels(tables["labels.csv"])

        train_examples = None
        if not disk_exists(self._cache_name("train")):
            train_examples = processor.get_examples(tables["train.csv"], "train")
        train_dataset = self.get_dataset_from_examples(train_examples, "train")
        self.train_dl = DataLoader(train_dataset, sampler=RandomSampler(train_dataset),
                                   batch_size=self.batch_size_per_gpu)

        val_examples = None
        if not disk_exists(self._cache_name("dev")):
            val_examples = processor.get_examples(tables["val.csv"], "dev")
        val_dataset = self.get_dataset_from_examples(val_examples, "dev")
        self.val_dl = DataLoader(val_dataset, sampler=SequentialSampler(val_dataset),
                                 batch_size=self.batch_size_per_gpu * 2)

    def _cache_name(self, set_type):
        return os.path.join(self.cache_dir, "cached_{}_{}_{}_{}".format(
            self.model_type, set_type, "multi_label" if self.multi_label else "multi_class",
            str(self.max_seq_length)))

    def get_dataset_from_examples(self, examples, set_type="train", is_test=False, no_cache=False):
        cached_features_file = self._cache_name(set_type)
        if disk_exists(cached_features_file) and not no_cache:
            print(f"Loading features from cached file {cached_features_file}")
            features = disk_load(cached_features_file)
        else:
            features = convert_examples_to_features(examples, self.labels, self.max_seq_length, self.tokenizer)
            if not self.no_cache and not no_cache:
                print(f"Saving features into cached file {cached_features_file}")
                disk_save(features, cached_features_file)
        all_input_ids = torch.tensor([f.input_ids for f in features], dtype=torch.long)
        all_input_mask = torch.tensor([f.input_mask for f in features], dtype=torch.long)
        if is_test:
            return TensorDataset(all_input_ids, all_input_mask)
        all_label_ids = torch.tensor([f.label_id for f in features], dtype=torch.long)
        return TensorDataset(all_input_ids, all_input_mask, all_label_ids)

    def get_dl_from_texts(self, texts):
        examples = [InputExample(i, t, label=None) for i, t in enumerate(texts)]
        dataset = self.get_dataset_from_examples(examples, "test", is_test=True, no_cache=True)
        return DataLoader(dataset, sampler=SequentialSampler(dataset), batch_size=self.batch_size_per_gpu)


class BagOfTokensClassifier(nn.Module):
    """Stand-in for BertForSequenceClassification: masked mean of token embeddings + a head."""

    def __init__(self, vocab_size, num_labels, dim=32):
        super().__init__()
        self.emb = nn.Embedding(vocab_size, dim, padding_idx=0)
        self.head = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, num_labels))

    def forward(self, input_ids, attention_mask):
        m = attention_mask.unsqueeze(-1).float()
        pooled = (self.emb(input_ids) * m).sum(1) / m.sum(1).clamp_min(1.0)
        return self.head(pooled)


class BertLearner:
    def __init__(self, databunch, model):
        self.data = databunch
        self.model = model

    def fit(self, epochs, lr, validate=True):
        optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr)
        for epoch in range(epochs):
            self.model.train()
            total = 0.0
            for input_ids, input_mask, label_ids in self.data.train_dl:
                logits = self.model(input_ids, input_mask)
                loss = F.cross_entropy(logits, label_ids)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                total += loss.item()
            msg = f"epoch {epoch} train loss {total / len(self.data.train_dl):.4f}"
            if validate:
                msg += f" val accuracy {self.validate():.3f}"
            print(msg)

    def validate(self):
        self.model.eval()
        correct = seen = 0
        with torch.no_grad():
            for input_ids, input_mask, label_ids in self.data.val_dl:
                correct += (self.model(input_ids, input_mask).argmax(-1) == label_ids).sum().item()
                seen += len(label_ids)
        return correct / seen

    def predict_batch(self, texts):
        self.model.eval()
        preds = []
        with torch.no_grad():
            for input_ids, input_mask in self.data.get_dl_from_texts(texts):
                preds += [self.data.labels[i] for i in self.model(input_ids, input_mask).argmax(-1).tolist()]
        return preds


def make_texts(n, seed, vocab=300, length=(8, 20)):
    g = torch.Generator().manual_seed(seed)
    texts = []
    for _ in range(n):
        k = int(torch.randint(length[0], length[1], (1,), generator=g))
        texts.append(" ".join(f"w{int(t)}" for t in torch.randint(0, vocab, (k,), generator=g)))
    return texts


def topic(text, keywords):
    words = set(text.split())
    return "complaint" if len(words & keywords) > 0 else "other"


def build_tables(texts_train, texts_val, keywords):
    return {
        "train.csv": [{"text": t, "label": topic(t, keywords)} for t in texts_train],
        "val.csv": [{"text": t, "label": topic(t, keywords)} for t in texts_val],
        "labels.csv": ["complaint", "other"],
    }


def run(data_dir, tables, tokenizer, seed):
    torch.manual_seed(seed)
    databunch = BertDataBunch(data_dir, tables, tokenizer, batch_size_per_gpu=16, max_seq_length=24)
    learner = BertLearner(databunch, BagOfTokensClassifier(tokenizer.vocab_size, len(databunch.labels)))
    learner.fit(epochs=3, lr=1e-2, validate=True)
    return learner


def main():
    tokenizer = WordTokenizer()
    data_dir = "data/tickets"
    texts_train, texts_val = make_texts(512, 0), make_texts(256, 1)
    # first labelling pass: the annotators used the wrong keyword list
    old_keywords = {f"w{i}" for i in range(150, 160)}
    print("== first run (old labels)")
    run(data_dir, build_tables(texts_train, texts_val, old_keywords), tokenizer, seed=0)

    # labels fixed in the csv files, same folder, same model type and max length
    new_keywords = {f"w{i}" for i in range(0, 10)}
    new_tables = build_tables(texts_train, texts_val, new_keywords)
    print("== retrain after fixing the labels")
    learner = run(data_dir, new_tables, tokenizer, seed=0)
    preds = learner.predict_batch(texts_val)
    agree = sum(p == row["label"] for p, row in zip(preds, new_tables["val.csv"])) / len(preds)
    print(f"agreement with the corrected val labels: {agree:.3f}")


if __name__ == "__main__":
    main()
