"""Fine-tuning a small T5-style encoder-decoder (T5ForConditionalGeneration shape: forward takes
input_ids, attention_mask, decoder_input_ids, decoder_attention_mask and labels, builds
decoder_input_ids by shifting labels right only when none are given, and scores logits[t] against
labels[t] without any further shift) in a plain training loop. The loop passes the tokenized target
both as decoder_input_ids and as labels (labels = decoder_input_ids). The causal decoder therefore
sees at position t the very token it is asked to predict there: it learns to copy its input, the
training loss drops towards zero, and at generation time, fed its own previous token, it produces
gibberish.

Thread: https://github.com/huggingface/transformers/issues/11977
"""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, PAD, EOS, SRC_LEN, TGT_LEN, DIM = 32, 0, 1, 8, 7, 64


class T5Config:
    vocab_size, d_model, num_heads, num_layers = VOCAB, DIM, 4, 2
    pad_token_id, eos_token_id, decoder_start_token_id = PAD, EOS, PAD


class T5ForConditionalGeneration(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.shared = nn.Embedding(config.vocab_size, config.d_model)
        self.pos = nn.Embedding(32, config.d_model)
        self.transformer = nn.Transformer(config.d_model, config.num_heads, config.num_layers, config.num_layers,
                                          dim_feedforward=2 * config.d_model, dropout=0.1, batch_first=True)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)

    def _shift_right(self, labels):
        shifted = labels.new_full(labels.shape, self.config.decoder_start_token_id)
        shifted[:, 1:] = labels[:, :-1]
        return shifted.masked_fill(shifted == -100, self.config.pad_token_id)

    def embed(self, ids):
        return self.shared(ids) + self.pos(torch.arange(ids.size(1)))

    def forward(self, input_ids, attention_mask=None, decoder_input_ids=None, decoder_attention_mask=None,
                labels=None):
        if labels is not None and decoder_input_ids is None:
            decoder_input_ids = self._shift_right(labels)
        causal = nn.Transformer.generate_square_subsequent_mask(decoder_input_ids.size(1))
        src_pad = None if attention_mask is None else attention_mask == 0
        tgt_pad = None if decoder_attention_mask is None else decoder_attention_mask == 0
        hidden = self.transformer(self.embed(input_ids), self.embed(decoder_input_ids), tgt_mask=causal,
                                  tgt_is_causal=True, src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad,
                                  memory_key_padding_mask=src_pad)
        logits = self.lm_head(hidden)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1), ignore_index=-100)
        return loss, logits

    @torch.no_grad()
    def generate(self, input_ids, attention_mask, max_length):
        out = torch.full((input_ids.size(0), 1), self.config.decoder_start_token_id)
        for _ in range(max_length):
            next_tok = self(input_ids, attention_mask, decoder_input_ids=out)[1][:, -1].argmax(-1, keepdim=True)
            out = torch.cat([out, next_tok], 1)
        return out[:, 1:]


def make_pairs(n, g):
    """Source: 6 content tokens; target: the same tokens in reverse order, then </s>."""
    content = torch.randint(2, VOCAB, (n, TGT_LEN - 1), generator=g)
    src = torch.cat([content, torch.full((n, 1), EOS), torch.full((n, SRC_LEN - TGT_LEN), PAD)], 1)
    tgt = torch.cat([content.flip(1), torch.full((n, 1), EOS)], 1)
    return src, (src != PAD).long(), tgt, torch.ones_like(tgt)


def train(model, optimizer, data, epochs, batch_size, g):
    src, src_mask, tgt, tgt_mask = data
    step = 0
    for epoch in range(epochs):
        model.train()
        order = torch.randperm(len(src), generator=g)
        for i in range(0, len(src), batch_size):
            idx = order[i:i + batch_size]
            input_ids, attention_mask = src[idx], src_mask[idx]
            decoder_input_ids, decoder_attention_mask = tgt[idx], tgt_mask[idx]
            labels = decoder_input_ids
            loss, _ = model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids,
                            decoder_attention_mask=decoder_attention_mask, labels=labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % 10 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = T5ForConditionalGeneration(T5Config())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    train(model, optimizer, make_pairs(1600, g), epochs=2, batch_size=32, g=g)
    model.eval()
    src, src_mask, tgt, _ = make_pairs(200, g)
    pred = model.generate(src, src_mask, max_length=TGT_LEN)
    print(f"exact-match of generated targets: {(pred == tgt).all(1).float().mean().item():.3f}, "
          f"token accuracy {(pred == tgt).float().mean().item():.3f}")


if __name__ == "__main__":
    main()
