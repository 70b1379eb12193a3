"""A vision-language captioning path: _tokenize_and_mask(tokenizer, caption, max_text_len, prompt)
returns right-padded input_ids and labels with the prompt and padding masked to -100, a joint
decoder runs causal self-attention over [image tokens, text tokens] and returns logits for the
text positions only, and cross_entropy_loss(logits, labels) applies no shift. The labels are
aligned with the inputs (labels[i] == input_ids[i]), so every text logit is scored against the
token already visible at its own position: the model learns to copy and the loss falls toward 0.

Thread: https://github.com/KempnerInstitute/KempnerForge/issues/154
"""
import torch
import torch.nn.functional as F
from torch import nn

ALPHABET = "abcdefghijklmnopqrstuvwxyz .,"


class CharTokenizer:
    pad_id, bos_id = 0, 1

    def encode(self, text):
        return [ALPHABET.index(c) + 2 for c in text]

    @property
    def vocab_size(self):
        return len(ALPHABET) + 2


def _tokenize_and_mask(tokenizer, caption, max_text_len, prompt=None):
    prompt_ids = [tokenizer.bos_id] + (tokenizer.encode(prompt) if prompt else [])
    ids = (prompt_ids + tokenizer.encode(caption))[:max_text_len]
    input_ids = torch.full((max_text_len,), tokenizer.pad_id)
    input_ids[:len(ids)] = torch.tensor(ids)
    labels = input_ids.clone()
    labels[:len(prompt_ids)] = -100
    labels[len(ids):] = -100
    return input_ids, labels


def cross_entropy_loss(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=-100)


class JointDecoder(nn.Module):
    def __init__(self, vocab, img_dim=16, n_img_tokens=4, dim=64, heads=4, layers=2, max_len=40):
        super().__init__()
        self.n_img = n_img_tokens
        self.img_proj = nn.Linear(img_dim, dim * n_img_tokens)
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(max_len, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.lm_head = nn.Linear(dim, vocab)

    def forward(self, image_feats, input_ids):
        B, T = input_ids.shape
        img = self.img_proj(image_feats).view(B, self.n_img, -1)
        x = torch.cat([img, self.tok(input_ids)], dim=1)
        x = x + self.pos[:x.size(1)]
        mask = nn.Transformer.generate_square_subsequent_mask(x.size(1))
        h = self.blocks(x, mask=mask, is_causal=True)
        output_slice = slice(self.n_img, None)
        return self.lm_head(h[:, output_slice])


def caption_batch(tokenizer, batch_size, max_text_len, g):
    colours = ["red", "green", "blue", "black"]
    shapes = ["cat", "boat", "tree", "house"]
    c = torch.randint(0, 4, (batch_size,), generator=g)
    s = torch.randint(0, 4, (batch_size,), generator=g)
    feats = torch.zeros(batch_size, 16)
    feats[torch.arange(batch_size), c] = 1.0
    feats[torch.arange(batch_size), 4 + s] = 1.0
    feats += 0.1 * torch.randn(batch_size, 16, generator=g)
    pairs = [_tokenize_and_mask(tokenizer, f"a {colours[ci]} {shapes[si]}.", max_text_len, prompt="photo of")
             for ci, si in zip(c.tolist(), s.tolist())]
    input_ids = torch.stack([p[0] for p in pairs])
    labels = torch.stack([p[1] for p in pairs])
    return feats, input_ids, labels


def main():
    torch.manual_seed(0)
    tokenizer = CharTokenizer()
    model = JointDecoder(tokenizer.vocab_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    g = torch.Generator().manual_seed(0)
    for step in range(80):
        feats, input_ids, labels = caption_batch(tokenizer, 32, 28, g)
        logits = model(feats, input_ids)
        loss = cross_entropy_loss(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            print(f"step {step} caption loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
