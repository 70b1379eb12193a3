"""Token classification over OCR segments with a layout-aware encoder (ERNIE-Layout style): each
document is a list of text segments with a bounding box and one label per segment. A helper
tokenize_layout(tokenizer, context, layout, labels) builds input_ids, bbox and labels: every token
of a segment gets the segment's box, [CLS] and [SEP] get label 0, a segment labelled 0 gives 0 to
all its tokens, and a labelled segment gives its label to the first token. The remaining sub-word
tokens of a labelled segment are padded with 0 instead of -100, so, while the model's loss ignores
only -100, they are trained as class 0 ("other"): the same pieces that start an entity are taught
to be "other" when they continue one, with the same box.

Thread: https://github.com/NormXU/ERNIE-Layout-Pytorch/issues/8
"""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, DIM, NUM_CLASSES, PIECES = 64, 64, 4, 60


class SegmentTokenizer:
    cls_token_id, sep_token_id, pad_token_id = 0, 1, 2

    def tokenize(self, segment):
        return list(segment)   # a segment is already a list of sub-word piece ids


def tokenize_layout(tokenizer, context, layout, labels=None, cls_box=(0, 0, 0, 0), sep_box=(1000,) * 4):
    res = {"input_ids": [tokenizer.cls_token_id], "bbox": [list(cls_box)],
           "labels": [0] if labels is not None else None}
    for idx, segment in enumerate(context):
        pieces = tokenizer.tokenize(segment)
        res["input_ids"].extend(pieces)
        res["bbox"].extend([list(layout[idx])] * len(pieces))
        if labels:
            if labels[idx] != 0:
                res["labels"].extend([labels[idx]] + [0] * (len(pieces) - 1))
            else:
                res["labels"].extend([labels[idx]] * len(pieces))
    res["input_ids"].append(tokenizer.sep_token_id)
    res["bbox"].append(list(sep_box))
    if labels:
        res["labels"].append(0)
    return res


class LayoutEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB, DIM)
        self.x_embeddings, self.y_embeddings = nn.Embedding(1001, DIM), nn.Embedding(1001, DIM)
        self.position_embeddings = nn.Embedding(128, DIM)
        layer = nn.TransformerEncoderLayer(DIM, 4, 2 * DIM, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, input_ids, bbox, attention_mask):
        pos = torch.arange(input_ids.size(1)).unsqueeze(0)
        h = (self.word_embeddings(input_ids) + self.position_embeddings(pos)
             + self.x_embeddings(bbox[..., 0]) + self.y_embeddings(bbox[..., 1]))
        return self.encoder(h, src_key_padding_mask=attention_mask == 0)


class ErnieLayoutForTokenClassification(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.ernie_layout = LayoutEncoder()
        self.dropout = nn.Dropout(0.1)
        self.classifier = nn.Linear(DIM, num_classes)

    def forward(self, input_ids, bbox, attention_mask, labels=None):
        logits = self.classifier(self.dropout(self.ernie_layout(input_ids, bbox, attention_mask)))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1), ignore_index=-100)
        return loss, logits


def make_document(g):
    """Segments of 1-4 pieces; a segment is an entity of class c when its box lies in column c."""
    context, layout, labels = [], [], []
    for row in range(int(torch.randint(6, 10, (1,), generator=g))):
        col = int(torch.randint(0, NUM_CLASSES, (1,), generator=g))
        n = int(torch.randint(1, 5, (1,), generator=g))
        context.append((torch.randint(3, 3 + PIECES, (n,), generator=g)).tolist())
        layout.append((100 + 250 * col, 50 + 100 * row, 200 + 250 * col, 90 + 100 * row))
        labels.append(col)
    return context, layout, labels


def collate(encodings, pad_id):
    width = max(len(e["input_ids"]) for e in encodings)
    batch = {"input_ids": torch.full((len(encodings), width), pad_id), "bbox": torch.zeros(len(encodings), width, 4,
             dtype=torch.long), "attention_mask": torch.zeros(len(encodings), width, dtype=torch.long),
             "labels": torch.full((len(encodings), width), -100)}
    for i, e in enumerate(encodings):
        n = len(e["input_ids"])
        batch["input_ids"][i, :n] = torch.tensor(e["input_ids"])
        batch["bbox"][i, :n] = torch.tensor(e["bbox"])
        batch["attention_mask"][i, :n] = 1
        batch["labels"][i, :n] = torch.tensor(e["labels"])
    return batch


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    tokenizer = SegmentTokenizer()
    docs = [make_document(g) for _ in range(960)]
    encodings = [tokenize_layout(tokenizer, c, l, y) for c, l, y in docs]
    model = ErnieLayoutForTokenClassification(num_classes=NUM_CLASSES)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    step = 0
    for epoch in range(4):
        model.train()
        order = torch.randperm(len(encodings), generator=g).tolist()
        for b in range(0, len(order), 48):
            batch = collate([encodings[i] for i in order[b:b + 48]], tokenizer.pad_token_id)
            loss, _ = model(**batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % 10 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
    model.eval()
    test = [make_document(g) for _ in range(200)]
    correct = total = 0
    with torch.no_grad():
        for c, l, y in test:
            enc = tokenize_layout(tokenizer, c, l, y)
            batch = collate([enc], tokenizer.pad_token_id)
            pred = model(batch["input_ids"], batch["bbox"], batch["attention_mask"])[1][0].argmax(-1)
            start = 1
            for seg, lab in zip(c, y):   # every token of a segment should carry its label
                correct += int((pred[start:start + len(seg)] == lab).sum())
                total += len(seg)
                start += len(seg)
    print(f"token accuracy against the segment labels: {correct / total:.3f}")


if __name__ == "__main__":
    main()
