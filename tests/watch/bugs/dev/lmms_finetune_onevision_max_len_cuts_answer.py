"""A LLaVA-OneVision style fine-tuning pipeline: a data collator class renders each (image,
question, answer) conversation with a chat template, expands the single <image> placeholder into
the full run of vision tokens the model will splice image features into, truncates the sequence
by hand to tokenizer.model_max_length, and builds labels from the assistant-token mask (everything
else -100). A small Trainer-like loop computes the causal-LM loss inside the model, clips the
gradient norm, steps AdamW and logs the loss with a NaN/inf filter. model_max_length was kept at a
value that only counted text tokens, but the collator now counts the expanded vision tokens too:
the image alone fills the budget, the truncation cuts off the whole answer, and every label in
every batch is -100. The loss is NaN (logged as 0.0 by the filter), the gradient norm is 0 and the
model never learns to answer, while the run completes normally.

Thread: https://github.com/zjysteven/lmms-finetune/issues/45
"""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

IGNORE_TOKEN_ID = -100
PAD, BOS, USER, ASSISTANT, IM_END, IMAGE = 0, 1, 2, 3, 4, 5
VOCAB = 40
NUM_CLASSES = 8
NUM_IMAGE_TOKENS = 36  # 6 x 6 patches after the vision tower


class ToyVQADataset(Dataset):
    """Each image is a 6x6 grid of 8-dim patch features; the answer word is the index of the
    prototype the image was drawn from."""

    def __init__(self, n, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.protos = torch.randn(NUM_CLASSES, NUM_IMAGE_TOKENS, 8, generator=torch.Generator().manual_seed(1))
        self.answers = torch.randint(0, NUM_CLASSES, (n,), generator=g)
        self.images = self.protos[self.answers] + 0.5 * torch.randn(n, NUM_IMAGE_TOKENS, 8, generator=g)
        self.questions = torch.randint(20, VOCAB, (n, 5), generator=g)

    def __len__(self):
        return len(self.answers)

    def __getitem__(self, i):
        return {"images": [self.images[i]],
                "conversations": ["<image> " + " ".join(str(t) for t in self.questions[i].tolist()),
                                  str(10 + int(self.answers[i]))]}


class Tokenizer:
    model_max_length = 32

    def encode(self, text):
        return [IMAGE if w == "<image>" else int(w) for w in text.split()]


class LLaVAOnevisionDataCollator:
    def __init__(self, tokenizer, num_image_tokens, mask_question_tokens=True):
        self.tokenizer = tokenizer
        self.num_image_tokens = num_image_tokens
        self.mask_question_tokens = mask_question_tokens

    def apply_chat_template(self, convs):
        ids, assistant_mask = [BOS], [False]
        for i, text in enumerate(convs):
            role = USER if i % 2 == 0 else ASSISTANT
            toks = [role] + self.tokenizer.encode(text) + [IM_END]
            ids += toks
            assistant_mask += [role == ASSISTANT and j > 0 for j in range(len(toks))]
        return torch.tensor([ids]), torch.tensor([assistant_mask])

    def __call__(self, instances):
        max_len = self.tokenizer.model_max_length
        input_ids, labels, pixel_values = [], [], []
        for instance in instances:
            cur_input_ids, cur_assistant_masks = self.apply_chat_template(instance["conversations"])
            # expand vision tokens
            repeat = torch.ones(cur_input_ids.shape[1], dtype=torch.long)
            repeat[torch.where(cur_input_ids == IMAGE)[1]] = self.num_image_tokens
            cur_input_ids = cur_input_ids.repeat_interleave(repeat, dim=1)
            cur_assistant_masks = cur_assistant_masks.repeat_interleave(repeat, dim=1)
            # manual truncation
            if cur_input_ids.shape[1] > max_len:
                cur_input_ids = cur_input_ids[:, :max_len]
                cur_assistant_masks = cur_assistant_masks[:, :max_len]
            cur_labels = cur_input_ids.clone()
            if self.mask_question_tokens:
                cur_labels = torch.where(cur_assistant_masks, cur_labels, IGNORE_TOKEN_ID)
            # padding
            pad = max_len - cur_input_ids.shape[1]
            if pad > 0:
                cur_input_ids = torch.cat([cur_input_ids, torch.full((1, pad), PAD)], dim=1)
                cur_labels = torch.cat([cur_labels, torch.full((1, pad), IGNORE_TOKEN_ID)], dim=1)
            input_ids.append(cur_input_ids)
            labels.append(cur_labels)
            pixel_values.append(torch.stack(instance["images"]))
        input_ids = torch.cat(input_ids)
        return dict(pixel_values=torch.cat(pixel_values), input_ids=input_ids,
                    labels=torch.cat(labels), attention_mask=input_ids.ne(PAD))


class TinyLlavaOnevision(nn.Module):
    def __init__(self, d=48):
        super().__init__()
        self.vision_tower = nn.Sequential(nn.Linear(8, d), nn.GELU())
        self.multi_modal_projector = nn.Linear(d, d)
        self.embed_tokens = nn.Embedding(VOCAB, d)
        layer = nn.TransformerEncoderLayer(d, 4, 96, dropout=0.0, batch_first=True)
        self.language_model = nn.TransformerEncoder(layer, 2)
        self.lm_head = nn.Linear(d, VOCAB)

    def forward(self, pixel_values, input_ids, attention_mask, labels=None):
        embeds = self.embed_tokens(input_ids)
        image_feats = self.multi_modal_projector(self.vision_tower(pixel_values))
        is_image = input_ids == IMAGE
        for b in range(input_ids.shape[0]):
            n = int(is_image[b].sum())
            embeds[b, is_image[b]] = image_feats[b, :n]
        T = input_ids.shape[1]
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
        hidden = self.language_model(embeds, mask=causal, src_key_padding_mask=~attention_mask)
        logits = self.lm_head(hidden)
        loss = None
        if labels is not None:
            shift_mask = attention_mask[:, 1:]
            shift_logits = logits[:, :-1][shift_mask]
            shift_labels = labels[:, 1:][shift_mask]
            loss = F.cross_entropy(shift_logits, shift_labels, ignore_index=IGNORE_TOKEN_ID)
        return loss, logits


def train(model, loader, num_train_epochs, lr=1e-3, max_grad_norm=1.0, logging_steps=20):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    tr_loss, logged_loss, global_step, last_logged = 0.0, 0.0, 0, 0
    model.train()
    for epoch in range(num_train_epochs):
        for batch in loader:
            loss, _ = model(**batch)
            loss.backward()
            tr_loss_step = loss.detach()
            if math.isnan(tr_loss_step) or math.isinf(tr_loss_step):
                # logging_nan_inf_filter: use the average of the previous logged losses
                tr_loss = tr_loss + tr_loss / (1 + global_step - last_logged)
            else:
                tr_loss = tr_loss + float(tr_loss_step)
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            optimizer.step()
            optimizer.zero_grad()
            global_step += 1
            if global_step % logging_steps == 0:
                avg = tr_loss / (global_step - last_logged)
                print(f"{{'loss': {avg:.4f}, 'grad_norm': {float(grad_norm):.4f}, "
                      f"'epoch': {epoch + 1}, 'step': {global_step}}}")
                tr_loss, last_logged = 0.0, global_step


@torch.no_grad()
def answer_accuracy(model, dataset, collator):
    model.eval()
    correct = 0
    for i in range(len(dataset)):
        item = dataset[i]
        prompt = {"images": item["images"], "conversations": [item["conversations"][0], "0"]}
        collator.tokenizer.model_max_length = 64
        batch = collator([prompt])
        ids = batch["input_ids"][0]
        pos = int((ids == ASSISTANT).nonzero()[0])
        _, logits = model(batch["pixel_values"], batch["input_ids"], batch["attention_mask"])
        correct += int(logits[0, pos].argmax()) == 10 + int(dataset.answers[i])
    return correct / len(dataset)


def main():
    torch.manual_seed(0)
    tokenizer = Tokenizer()
    collator = LLaVAOnevisionDataCollator(tokenizer, num_image_tokens=NUM_IMAGE_TOKENS)
    train_set, eval_set = ToyVQADataset(640, seed=0), ToyVQADataset(128, seed=1)
    loader = DataLoader(train_set, batch_size=16, shuffle=True, collate_fn=collator,
                        generator=torch.Generator().manual_seed(0))
    model = TinyLlavaOnevision()
    train(model, loader, num_train_epochs=4)
    print(f"eval answer accuracy: {answer_accuracy(model, eval_set, collator):.3f}")


if __name__ == "__main__":
    main()
