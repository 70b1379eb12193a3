"""A run_epoch(data_iter, model, loss_compute) helper shared by training and validation, with a
SimpleLossCompute class that always calls loss.backward() and steps and clears the optimizer only
when one is given; validation passes None, so its gradients stay in .grad and are applied by the
next training step: the model is fitted to the validation data.

Thread: https://github.com/harvardnlp/annotated-transformer/issues/14
"""
import torch
from torch import nn


class Generator(nn.Module):
    def __init__(self, d_model, vocab):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab)

    def forward(self, x):
        return torch.log_softmax(self.proj(x), dim=-1)


class TinyTransformer(nn.Module):
    def __init__(self, vocab=11, d_model=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        layer = nn.TransformerEncoderLayer(d_model, 4, 64, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1)
        self.generator = Generator(d_model, vocab)

    def forward(self, src):
        return self.encoder(self.embed(src))


class SimpleLossCompute:
    "A simple loss compute and train function."
    def __init__(self, generator, criterion, opt=None):
        self.generator, self.criterion, self.opt = generator, criterion, opt

    def __call__(self, x, y, norm):
        x = self.generator(x)
        loss = self.criterion(x.contiguous().view(-1, x.size(-1)), y.contiguous().view(-1)) / norm
        loss.backward()
        if self.opt is not None:
            self.opt.step()
            self.opt.zero_grad()
        return loss.item() * norm


def run_epoch(data_iter, model, loss_compute):
    total_loss, total_tokens = 0.0, 0
    for src, tgt in data_iter:
        out = model(src)
        ntokens = tgt.numel()
        total_loss += loss_compute(out, tgt, ntokens)
        total_tokens += ntokens
    return total_loss / total_tokens


def data_gen(V, batch, nbatches, g):
    for _ in range(nbatches):
        src = torch.randint(1, V, (batch, 10), generator=g)
        yield src, src.flip(1)  # reverse the sequence


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = TinyTransformer()
    criterion = nn.NLLLoss(reduction="sum")
    model_opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)
    for epoch in range(6):
        model.train()
        run_epoch(data_gen(11, 30, 10, g), model, SimpleLossCompute(model.generator, criterion, model_opt))
        model.eval()
        print(f"epoch {epoch} val loss "
              f"{run_epoch(data_gen(11, 30, 5, g), model, SimpleLossCompute(model.generator, criterion, None)):.4f}")


if __name__ == "__main__":
    main()
