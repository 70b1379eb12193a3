"""
Shape: notebook-style BERT sentiment fine-tuning, cells flattened into a script: BertForSequenceClassification.from_pretrained, a TensorDataset of input ids / attention masks / labels, a RandomSampler DataLoader with a module-level train_batch_size and n_epochs, total_steps computed from the loader length, transformers AdamW and get_linear_schedule_with_warmup(num_warmup_steps=0, num_training_steps=total_steps), then a trange over epochs with a tqdm batch loop (model.zero_grad, batch to device, dict inputs with labels, loss = outputs[0], backward, clip to 1.0, optimizer.step, scheduler.step), followed by an eval pass over a SequentialSampler loader with argmax accuracy.
Bug: total_steps = len(train_loader) // n_epochs divides instead of multiplies, so the linear schedule that is stepped every batch reaches zero after a fraction of the first epoch and the remaining updates run at lr 0; the loss stops decreasing.
Thread: https://github.com/blueprints-for-text-analytics-python/blueprints-text/issues/7
"""
import numpy as np
import torch
from sklearn.metrics import accuracy_score
from torch.utils.data import DataLoader, RandomSampler, SequentialSampler, TensorDataset
from tqdm import notebook, trange
from transformers import AdamW, BertConfig, BertForSequenceClassification, BertTokenizer, \
    get_linear_schedule_with_warmup

from prep import encode_reviews, load_reviews

config = BertConfig.from_pretrained('bert-base-uncased', finetuning_task='binary')
tokenizer = BertTokenizer.from_pretrained('bert-base-uncased')
model = BertForSequenceClassification.from_pretrained('bert-base-uncased')

train_df, test_df = load_reviews()
train_ids, train_masks, train_labels = encode_reviews(tokenizer, train_df)
test_ids, test_masks, test_labels = encode_reviews(tokenizer, test_df)
train_dataset = TensorDataset(train_ids, train_masks, train_labels)
test_dataset = TensorDataset(test_ids, test_masks, test_labels)

train_batch_size = 64
n_epochs = 2
train_loader = DataLoader(train_dataset, sampler=RandomSampler(train_dataset), batch_size=train_batch_size)
total_steps = len(train_loader) // n_epochs
print("Num examples = ", len(train_dataset))
print("Total optimization steps = ", total_steps)

learning_rate = 1e-4
adam_epsilon = 1e-8
warmup_steps = 0
optimizer = AdamW(model.parameters(), lr=learning_rate, eps=adam_epsilon)
scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=warmup_steps, num_training_steps=total_steps)

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model.train()
for epoch in trange(n_epochs, desc="Epoch"):
    for step, batch in enumerate(notebook.tqdm(train_loader, desc="Iteration")):
        model.zero_grad()
        model.to(device)
        batch = tuple(t.to(device) for t in batch)
        inputs = {'input_ids': batch[0], 'attention_mask': batch[1], 'labels': batch[2]}
        outputs = model(**inputs)
        loss = outputs[0]
        print("\r%f" % loss, end='')
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()

test_dataloader = DataLoader(test_dataset, sampler=SequentialSampler(test_dataset), batch_size=64)
preds, out_label_ids = None, None
model.eval()
for batch in notebook.tqdm(test_dataloader, desc="Evaluating"):
    batch = tuple(t.to(device) for t in batch)
    with torch.no_grad():
        inputs = {'input_ids': batch[0], 'attention_mask': batch[1], 'labels': batch[2]}
        logits = model(**inputs)[1]
    batch_preds = logits.detach().cpu().numpy()
    batch_labels = inputs['labels'].detach().cpu().numpy()
    preds = batch_preds if preds is None else np.append(preds, batch_preds, axis=0)
    out_label_ids = batch_labels if out_label_ids is None else np.append(out_label_ids, batch_labels, axis=0)
print('Accuracy Score on Test data ', accuracy_score(np.argmax(preds, axis=1), out_label_ids))
