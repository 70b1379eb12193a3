"""A DALL-E style text-to-image transformer trained on pre-computed VAE codebook indices: the DALLE
module embeds text tokens (right-padded with 0 to text_seq_len, a 0 is also prepended as <bos>)
followed by image tokens, runs a causal transformer, masks the logits so text positions predict
text and image positions predict image tokens, and in forward(text, image, return_loss=True)
scores them with F.cross_entropy(logits, labels) where labels = [text[:, 1:], image + offset]. The
module stores ignore_index but never passes it, so every padding position of the caption is a
target: most text targets are "predict pad", which the model learns at once, the text loss looks
low and the padding dilutes the loss on the real caption and image tokens.

Thread: https://github.com/lucidrains/DALLE-pytorch/issues/57
"""
import torch
import torch.nn.functional as F
from torch import nn


class DALLE(nn.Module):
    def __init__(self, *, dim, num_text_tokens, text_seq_len, num_image_tokens, image_seq_len, depth, heads,
                 ignore_index=-100):
        super().__init__()
        self.text_emb = nn.Embedding(num_text_tokens, dim)
        self.image_emb = nn.Embedding(num_image_tokens, dim)
        self.text_pos_emb = nn.Embedding(text_seq_len + 1, dim)
        self.image_pos_emb = nn.Embedding(image_seq_len, dim)
        self.num_text_tokens, self.text_seq_len = num_text_tokens, text_seq_len
        self.total_seq_len = text_seq_len + image_seq_len
        total_tokens = num_text_tokens + num_image_tokens
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True, norm_first=True)
        self.transformer = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.to_logits = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, total_tokens))
        seq_range = torch.arange(self.total_seq_len)[None, :, None]
        logits_range = torch.arange(total_tokens)[None, None, :]
        logits_mask = ((seq_range >= text_seq_len) & (logits_range < num_text_tokens)) | \
                      ((seq_range < text_seq_len) & (logits_range >= num_text_tokens))
        self.register_buffer("logits_mask", logits_mask)
        self.ignore_index = ignore_index

    def forward(self, text, image, return_loss=False):
        text = F.pad(text, (1, 0), value=0)  # padding id doubles as <bos>
        tokens = self.text_emb(text) + self.text_pos_emb(torch.arange(text.shape[1]))
        image_emb = self.image_emb(image) + self.image_pos_emb(torch.arange(image.shape[1]))
        tokens = torch.cat((tokens, image_emb), dim=1)[:, :-1]
        n = tokens.shape[1]
        causal = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
        logits = self.to_logits(self.transformer(tokens, mask=causal, is_causal=True))
        logits = logits.masked_fill(self.logits_mask[:, :n], -torch.finfo(logits.dtype).max)
        if not return_loss:
            return logits
        labels = torch.cat((text[:, 1:], image + self.num_text_tokens), dim=1)
        return F.cross_entropy(logits.transpose(1, 2), labels)


def caption_image_pairs(n, text_seq_len, image_seq_len, seed):
    """Captions of 2-5 word ids (1..31) right-padded with 0; each caption word paints one image row."""
    g = torch.Generator().manual_seed(seed)
    row_code = torch.randint(0, 16, (32, 4), generator=torch.Generator().manual_seed(9))
    text = torch.zeros(n, text_seq_len, dtype=torch.long)
    image = torch.zeros(n, image_seq_len, dtype=torch.long)
    for i in range(n):
        k = int(torch.randint(2, 6, (1,), generator=g))
        words = torch.randint(1, 32, (k,), generator=g)
        text[i, :k] = words
        rows = [row_code[words[r % k]] for r in range(image_seq_len // 4)]
        image[i] = torch.cat(rows)
        noise = torch.rand(image_seq_len, generator=g) < 0.1
        image[i][noise] = torch.randint(0, 16, (int(noise.sum()),), generator=g)
    return text, image


def main():
    torch.manual_seed(0)
    TEXT_SEQ_LEN, IMAGE_SEQ_LEN, BATCH_SIZE, EPOCHS, LEARNING_RATE = 16, 16, 16, 3, 3e-4
    text, image = caption_image_pairs(640, TEXT_SEQ_LEN, IMAGE_SEQ_LEN, seed=0)
    dalle = DALLE(dim=64, num_text_tokens=32, text_seq_len=TEXT_SEQ_LEN, num_image_tokens=16,
                  image_seq_len=IMAGE_SEQ_LEN, depth=2, heads=4)
    opt = torch.optim.Adam(dalle.parameters(), lr=LEARNING_RATE)
    g = torch.Generator().manual_seed(1)
    for epoch in range(EPOCHS):
        perm = torch.randperm(len(text), generator=g)
        for i, idx in enumerate(perm.split(BATCH_SIZE)):
            loss = dalle(text[idx], image[idx], return_loss=True)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(dalle.parameters(), 0.5)
            opt.step()
            if i % 10 == 0:
                print(f"epoch {epoch} iter {i} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
