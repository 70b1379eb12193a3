"""A Donut-style document parser fine-tuned through a Lightning-style module: DonutModule.training_step()
calls a VisionEncoderDecoderModel(pixel_values, labels=labels) whose forward builds decoder_input_ids
by shifting the labels right (decoder start token in front, -100 turned back into padding) and then
computes the loss with a causal-LM loss function that shifts the labels left a second time, so the
logits at position t are scored against labels[t + 1] instead of labels[t]. Training runs and the loss
falls, but the decoder learns to emit the token after the next one and the greedy-decoded validation
sequences come out with every other field token missing (a high normalized edit distance).

Thread: https://github.com/huggingface/transformers/pull/40863
"""
import torch
import torch.nn.functional as F
from torch import nn

PAD, START, EOS, OPEN, CLOSE = 0, 1, 2, 3, 4
DIGIT0 = 5
VOCAB = DIGIT0 + 10
N_FIELDS = 6
MAX_LEN = N_FIELDS + 3


def shift_tokens_right(labels, pad_token_id, decoder_start_token_id):
    shifted = labels.new_zeros(labels.shape)
    shifted[:, 1:] = labels[:, :-1].clone()
    shifted[:, 0] = decoder_start_token_id
    return shifted.masked_fill(shifted == -100, pad_token_id)


def for_causal_lm_loss(logits, labels, vocab_size, ignore_index=-100):
    shift_logits = logits[:, :-1, :].reshape(-1, vocab_size)
    shift_labels = labels[:, 1:].reshape(-1)
    return F.cross_entropy(shift_logits, shift_labels, ignore_index=ignore_index)


class PatchEncoder(nn.Module):
    def __init__(self, patch_dim=16, n_patches=N_FIELDS, dim=64):
        super().__init__()
        self.embed = nn.Linear(patch_dim, dim)
        self.pos = nn.Parameter(torch.randn(n_patches, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, 4, 4 * dim, dropout=0.1, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, pixel_values):
        return self.blocks(self.embed(pixel_values) + self.pos)


class TextDecoder(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, dim)
        self.pos = nn.Parameter(torch.randn(MAX_LEN, dim) * 0.02)
        layer = nn.TransformerDecoderLayer(dim, 4, 4 * dim, dropout=0.1, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerDecoder(layer, 2)
        self.lm_head = nn.Linear(dim, VOCAB)

    def forward(self, input_ids, encoder_hidden_states):
        T = input_ids.size(1)
        x = self.tok(input_ids) + self.pos[:T]
        mask = nn.Transformer.generate_square_subsequent_mask(T)
        return self.lm_head(self.blocks(x, encoder_hidden_states, tgt_mask=mask, tgt_is_causal=True))


class VisionEncoderDecoderModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder, self.decoder = PatchEncoder(), TextDecoder()
        self.pad_token_id, self.decoder_start_token_id = PAD, START
        self.loss_function = for_causal_lm_loss

    def forward(self, pixel_values, labels=None, decoder_input_ids=None):
        encoder_hidden_states = self.encoder(pixel_values)
        if labels is not None and decoder_input_ids is None:
            decoder_input_ids = shift_tokens_right(labels, self.pad_token_id, self.decoder_start_token_id)
        logits = self.decoder(decoder_input_ids, encoder_hidden_states)
        loss = None
        if labels is not None:
            loss = self.loss_function(logits, labels, vocab_size=VOCAB)
        return {"loss": loss, "logits": logits}

    @torch.no_grad()
    def generate(self, pixel_values, max_length=MAX_LEN):
        encoder_hidden_states = self.encoder(pixel_values)
        ids = torch.full((pixel_values.size(0), 1), self.decoder_start_token_id)
        for _ in range(max_length):
            next_id = self.decoder(ids, encoder_hidden_states)[:, -1].argmax(-1, keepdim=True)
            ids = torch.cat([ids, next_id], dim=1)
        return ids[:, 1:]


def edit_distance(a, b):
    d = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        prev, d[0] = d[0], i
        for j in range(1, len(b) + 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (a[i - 1] != b[j - 1]))
    return d[len(b)]


def strip(seq):
    seq = seq.tolist()
    return seq[:seq.index(EOS)] if EOS in seq else seq


class DonutModule:
    def __init__(self, model, lr=5e-4):
        self.model, self.lr = model, lr

    def configure_optimizers(self):
        return torch.optim.Adam(self.model.parameters(), lr=self.lr)

    def training_step(self, batch, batch_idx):
        pixel_values, labels, _ = batch
        return self.model(pixel_values, labels=labels)["loss"]

    def validation_step(self, batch, batch_idx):
        pixel_values, _, answers = batch
        preds = self.model.generate(pixel_values)
        scores = []
        for pred, ans in zip(preds, answers):
            p, a = strip(pred), strip(ans)
            scores.append(edit_distance(p, a) / max(len(p), len(a), 1))
        return sum(scores) / len(scores)


class Trainer:
    def __init__(self, max_epochs):
        self.max_epochs = max_epochs

    def fit(self, module, train_batches, val_batches):
        optimizer = module.configure_optimizers()
        step = 0
        for epoch in range(self.max_epochs):
            module.model.train()
            for batch_idx, batch in enumerate(train_batches):
                loss = module.training_step(batch, batch_idx)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                if step % 10 == 0:
                    print(f"epoch {epoch} step {step} train_loss {loss.item():.4f}")
                step += 1
            module.model.eval()
            ned = sum(module.validation_step(b, i) for i, b in enumerate(val_batches)) / len(val_batches)
            print(f"epoch {epoch} val_edit_distance {ned:.3f}")


def make_batch(g, batch_size=32):
    digits = torch.randint(0, 10, (batch_size, N_FIELDS), generator=g)
    pixel_values = torch.zeros(batch_size, N_FIELDS, 16)
    pixel_values.scatter_(2, digits.unsqueeze(-1), 1.0)
    pixel_values[:, :, 10:] = 0.5 * torch.randn(batch_size, N_FIELDS, 6, generator=g)
    seq = torch.cat([torch.full((batch_size, 1), OPEN), digits + DIGIT0,
                     torch.full((batch_size, 1), CLOSE), torch.full((batch_size, 1), EOS)], dim=1)
    labels = seq.clone()
    labels[labels == PAD] = -100
    return pixel_values, labels, seq


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    train_batches = [make_batch(g) for _ in range(25)]
    val_batches = [make_batch(g, 64)]
    module = DonutModule(VisionEncoderDecoderModel())
    Trainer(max_epochs=3).fit(module, train_batches, val_batches)


if __name__ == "__main__":
    main()
