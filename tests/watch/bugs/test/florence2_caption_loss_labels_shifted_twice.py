"""A Florence-2-style captioning fine-tune: Florence2ForConditionalGeneration projects the vision
tower's patch features, prepends them to the embedded task prompt ("<CAPTION>"), runs a BART-like
encoder over the joint sequence, and when labels are given builds decoder_input_ids with
shift_tokens_right(labels); the loss is then taken with a causal-LM loss function that shifts the
labels left again, so each decoder position is trained against the caption token two places ahead
of its input instead of the next one. A small HF-style Trainer (compute_loss -> outputs.loss, AdamW,
linear decay, step then zero_grad) runs to the end; the loss falls while the model learns an
off-by-one caption.

Thread: https://github.com/huggingface/transformers/pull/46898
"""
import torch
import torch.nn.functional as F
from torch import nn

SPECIAL = ["<pad>", "<s>", "</s>", "<CAPTION>"]
WORDS = ["a", "an", "image", "of", "with", "red", "green", "blue", "white", "bird", "horse", "bike",
         "chair", "lamp", "cup", "in", "room", "park", "street"]
VOCAB = SPECIAL + WORDS
PAD, BOS, EOS, TASK = 0, 1, 2, 3
MAX_TGT = 10


def shift_tokens_right(input_ids, pad_token_id, decoder_start_token_id):
    shifted = input_ids.new_zeros(input_ids.shape)
    shifted[:, 1:] = input_ids[:, :-1].clone()
    shifted[:, 0] = decoder_start_token_id
    return shifted.masked_fill(shifted == -100, pad_token_id)


def ForCausalLMLoss(logits, labels, vocab_size, ignore_index=-100):
    logits = logits[..., :-1, :].contiguous()
    labels = labels[..., 1:].contiguous()
    return F.cross_entropy(logits.view(-1, vocab_size), labels.view(-1), ignore_index=ignore_index)


class VisionTower(nn.Module):
    def __init__(self, in_dim=12, dim=64):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(in_dim, dim), nn.GELU(), nn.Linear(dim, dim))

    def forward(self, pixel_values):
        return self.stem(pixel_values)


class Florence2ForConditionalGeneration(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.vision_tower = VisionTower(dim=dim)
        self.image_projection = nn.Linear(dim, dim)
        self.shared = nn.Embedding(len(VOCAB), dim)
        self.pos = nn.Parameter(torch.randn(32, dim) * 0.02)
        enc = nn.TransformerEncoderLayer(dim, 4, 4 * dim, dropout=0.1, batch_first=True, norm_first=True)
        dec = nn.TransformerDecoderLayer(dim, 4, 4 * dim, dropout=0.1, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(enc, 2, enable_nested_tensor=False)
        self.decoder = nn.TransformerDecoder(dec, 2)
        self.lm_head = nn.Linear(dim, len(VOCAB), bias=False)
        self.vocab_size = len(VOCAB)
        self.loss_function = ForCausalLMLoss

    def _merge_input_ids_with_image_features(self, image_features, inputs_embeds):
        return torch.cat([image_features, inputs_embeds], dim=1)

    def forward(self, input_ids, pixel_values, labels=None, decoder_input_ids=None):
        image_features = self.image_projection(self.vision_tower(pixel_values))
        inputs_embeds = self._merge_input_ids_with_image_features(image_features, self.shared(input_ids))
        encoder_hidden = self.encoder(inputs_embeds + self.pos[:inputs_embeds.size(1)])
        if labels is not None and decoder_input_ids is None:
            decoder_input_ids = shift_tokens_right(labels, PAD, BOS)
        T = decoder_input_ids.size(1)
        dec_in = self.shared(decoder_input_ids) + self.pos[:T]
        mask = nn.Transformer.generate_square_subsequent_mask(T)
        logits = self.lm_head(self.decoder(dec_in, encoder_hidden, tgt_mask=mask, tgt_is_causal=True))
        loss = None
        if labels is not None:
            loss = self.loss_function(logits=logits, labels=labels, vocab_size=self.vocab_size)
        return {"loss": loss, "logits": logits}


def collate(g, batch_size=32):
    colours, things, places = WORDS[5:9], WORDS[9:15], WORDS[16:19]
    c = torch.randint(0, 4, (batch_size,), generator=g)
    t = torch.randint(0, 6, (batch_size,), generator=g)
    p = torch.randint(0, 3, (batch_size,), generator=g)
    pixel_values = 0.3 * torch.randn(batch_size, 4, 12, generator=g)
    idx = torch.arange(batch_size)
    pixel_values[idx, 0, c] += 1.0
    pixel_values[idx, 1, 4 + t] += 1.0
    pixel_values[idx, 2, p] += 1.0
    input_ids = torch.tensor([[BOS, TASK, EOS]] * batch_size)
    labels = torch.full((batch_size, MAX_TGT), -100)
    for i in range(batch_size):
        words = ["a", colours[c[i]], things[t[i]], "in", places[p[i]]]
        ids = [BOS] + [VOCAB.index(w) for w in words] + [EOS]
        labels[i, :len(ids)] = torch.tensor(ids)
    return {"input_ids": input_ids, "pixel_values": pixel_values, "labels": labels}


class Trainer:
    def __init__(self, model, train_dataset, num_train_epochs=3, learning_rate=3e-4, logging_steps=10):
        self.model, self.train_dataset = model, train_dataset
        self.num_train_epochs, self.logging_steps = num_train_epochs, logging_steps
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.01)
        total = num_train_epochs * len(train_dataset)
        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: max(0.0, 1 - s / total))

    def compute_loss(self, model, inputs):
        return model(**inputs)["loss"]

    def train(self):
        step = 0
        self.model.train()
        for epoch in range(self.num_train_epochs):
            for inputs in self.train_dataset:
                loss = self.compute_loss(self.model, inputs)
                loss.backward()
                nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.optimizer.step()
                self.lr_scheduler.step()
                self.optimizer.zero_grad()
                if step % self.logging_steps == 0:
                    print(f"epoch {epoch} step {step} loss {loss.item():.4f} lr {self.lr_scheduler.get_last_lr()[0]:.2e}")
                step += 1


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    train_dataset = [collate(g) for _ in range(25)]
    model = Florence2ForConditionalGeneration()
    Trainer(model, train_dataset).train()


if __name__ == "__main__":
    main()
