"""A GIT-style image-captioning fine-tune: a GitForCausalLM-like model projects image features
to a few image tokens, runs them with the caption tokens through one causal decoder, and its
forward(input_ids, pixel_values, labels) computes the loss; the training loop passes
labels=input_ids (as the model card says), calls backward, steps AdamW and zeros the gradients.
Inside forward the logits are cut to the text positions with the last one dropped and the labels
are shifted by one (labels[:, 1:]), both flattened, and then handed to a shared causal-LM loss
helper that shifts the labels AGAIN (pads with -100 and takes [1:]). Position t is trained to
predict token t + 2, and because the flattening happens before the second shift, each row's last
target is the first caption token of the next row. The loss still falls, but teacher-forced
next-token accuracy and the greedy captions are poor.

Thread: https://github.com/huggingface/transformers/issues/47394
"""
import torch
import torch.nn.functional as F
from torch import nn

BOS, EOS, PAD = 1, 2, 0


def for_causal_lm_loss(logits, labels, vocab_size, ignore_index=-100, shift_labels=None):
    """Shared loss helper: shifts the labels itself unless shift_labels is given."""
    logits = logits.float()
    if shift_labels is None:
        labels = F.pad(labels, (0, 1), value=ignore_index)
        shift_labels = labels[..., 1:].contiguous()
    return F.cross_entropy(logits.view(-1, vocab_size), shift_labels.view(-1), ignore_index=ignore_index)


class TinyGitForCausalLM(nn.Module):
    def __init__(self, vocab_size=40, image_dim=24, image_patch_tokens=4, dim=64, layers=2, max_len=16):
        super().__init__()
        self.vocab_size, self.image_patch_tokens = vocab_size, image_patch_tokens
        self.visual_projection = nn.Linear(image_dim, image_patch_tokens * dim)
        self.embed_tokens = nn.Embedding(vocab_size, dim)
        self.embed_positions = nn.Embedding(max_len + image_patch_tokens, dim)
        layer = nn.TransformerEncoderLayer(dim, 4, 4 * dim, dropout=0.0, batch_first=True, norm_first=True)
        self.decoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.output = nn.Linear(dim, vocab_size)
        self.loss_function = for_causal_lm_loss

    def forward(self, input_ids, pixel_values, labels=None):
        b, t = input_ids.shape
        k = self.image_patch_tokens
        img = self.visual_projection(pixel_values).view(b, k, -1)
        x = torch.cat([img, self.embed_tokens(input_ids)], dim=1)
        x = x + self.embed_positions(torch.arange(k + t))
        mask = torch.triu(torch.full((k + t, k + t), float("-inf")), diagonal=1)
        mask[:k, :k] = 0.0  # image tokens attend to each other
        logits = self.output(self.decoder(x, mask=mask))
        loss = None
        if labels is not None:
            # next-token prediction: shift prediction scores and input ids by one
            shifted_logits = logits[:, k:-1, :].contiguous()
            labels = labels[:, 1:].contiguous()
            loss = self.loss_function(shifted_logits.view(-1, self.vocab_size), labels.view(-1),
                                      vocab_size=self.vocab_size)
        return logits, loss


def make_captions(n, seed, image_dim=24, vocab=40, length=12):
    """Caption = BOS, an object word chosen by the image, then words that follow the previous word
    by a fixed rule with some noise, EOS."""
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(8, image_dim, generator=torch.Generator().manual_seed(3))
    follow = torch.randint(3, vocab, (vocab,), generator=torch.Generator().manual_seed(4))
    cls = torch.randint(0, 8, (n,), generator=g)
    pixel_values = protos[cls] + 0.3 * torch.randn(n, image_dim, generator=g)
    ids = torch.full((n, length), PAD, dtype=torch.long)
    ids[:, 0] = BOS
    ids[:, 1] = 3 + cls * 4
    for t in range(2, length - 1):
        rand = torch.randint(3, vocab, (n,), generator=g)
        keep = torch.rand(n, generator=g) < 0.85
        ids[:, t] = torch.where(keep, follow[ids[:, t - 1]], rand)
    ids[:, -1] = EOS
    return pixel_values, ids


@torch.no_grad()
def next_token_accuracy(model, pixel_values, input_ids):
    logits, _ = model(input_ids, pixel_values)
    k = model.image_patch_tokens
    pred = logits[:, k:-1].argmax(-1)
    return (pred == input_ids[:, 1:]).float().mean().item()


def main():
    torch.manual_seed(0)
    train_px, train_ids = make_captions(2048, seed=1)
    val_px, val_ids = make_captions(256, seed=2)
    model = TinyGitForCausalLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch_size, step = 32, 0
    for epoch in range(3):
        model.train()
        perm = torch.randperm(len(train_ids))
        for i in range(0, len(perm), batch_size):
            idx = perm[i:i + batch_size]
            input_ids, pixel_values = train_ids[idx], train_px[idx]
            _, loss = model(input_ids=input_ids, pixel_values=pixel_values, labels=input_ids)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            step += 1
            if step % 25 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
        model.eval()
        print(f"epoch {epoch} val next-token accuracy {next_token_accuracy(model, val_px, val_ids):.3f}")


if __name__ == "__main__":
    main()
