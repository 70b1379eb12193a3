"""Annotated-Transformer-style OCR training: SimpleLossCompute calls backward even for the test pass.

Training is organised as run_epoch(data_iter, model, loss_compute) with a loss-compute
object SimpleLossCompute(generator, criterion, opt) that always calls loss.backward() and
only steps / zeroes the optimizer (a NoamOpt warm-up wrapper around Adam) when opt is not
None. Each epoch trains, then evaluates with model.eval() and SimpleLossCompute(..., None)
without torch.no_grad(). The test batches' gradients pile up in .grad and are applied by
the first training step of the next epoch, so the model is fitted to the evaluation data
and the printed test loss flatters it compared with truly unseen data.
Thread: https://github.com/fengxinjie/Transformer-OCR/issues/7
"""
import torch
import torch.nn as nn


class NoamOpt:
    def __init__(self, model_size, factor, warmup, optimizer):
        self.optimizer, self._step, self.warmup = optimizer, 0, warmup
        self.factor, self.model_size = factor, model_size

    def rate(self, step=None):
        step = self._step if step is None else step
        return self.factor * self.model_size ** -0.5 * min(step ** -0.5, step * self.warmup ** -1.5)

    def step(self):
        self._step += 1
        for p in self.optimizer.param_groups:
            p['lr'] = self.rate()
        self.optimizer.step()


class Batch:
    def __init__(self, src, tgt):
        self.src, self.trg_y = src, tgt
        self.ntokens = tgt.numel()


class OCRModel(nn.Module):
    """Stand-in for the encoder-decoder: per-position features -> hidden states."""
    def __init__(self, d_feat, d_model, vocab):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(d_feat, d_model), nn.ReLU(),
                                     nn.Linear(d_model, d_model), nn.ReLU())
        self.generator = nn.Linear(d_model, vocab)

    def forward(self, src):
        return self.encoder(src)


class SimpleLossCompute:
    def __init__(self, generator, criterion, opt=None):
        self.generator, self.criterion, self.opt = generator, criterion, opt

    def __call__(self, x, y, norm):
        x = self.generator(x)
        loss = self.criterion(x.contiguous().view(-1, x.size(-1)), y.contiguous().view(-1)) / norm
        loss.backward()
        if self.opt is not None:
            self.opt.step()
            self.opt.optimizer.zero_grad()
        return loss.item() * norm


def run_epoch(data_iter, model, loss_compute):
    total_loss, total_tokens = 0.0, 0
    for batch in data_iter:
        out = model(batch.src)
        loss = loss_compute(out, batch.trg_y, batch.ntokens)
        total_loss += loss
        total_tokens += batch.ntokens
    return total_loss / total_tokens


def make_set(gen, proj, n, seq_len=12, noise_frac=0.35):
    src = torch.randn(n, seq_len, proj.shape[0], generator=gen)
    tgt = (src @ proj).argmax(-1)
    flip = torch.rand(tgt.shape, generator=gen) < noise_frac   # hard-to-read glyphs
    tgt[flip] = torch.randint(0, proj.shape[1], (int(flip.sum()),), generator=gen)
    return src, tgt


def batches(src, tgt, bs):
    return [Batch(src[i:i + bs], tgt[i:i + bs]) for i in range(0, src.shape[0], bs)]


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    d_feat, vocab = 10, 12
    proj = torch.randn(d_feat, vocab, generator=gen)
    tr = make_set(gen, proj, 256)
    va = make_set(gen, proj, 256)
    fresh = make_set(gen, proj, 1024)

    model = OCRModel(d_feat, 128, vocab)
    criterion = nn.CrossEntropyLoss(reduction='sum')
    model_opt = NoamOpt(128, 1, 100, torch.optim.Adam(model.parameters(), lr=0, betas=(0.9, 0.98), eps=1e-9))

    for epoch in range(30):
        model.train()
        train_loss = run_epoch(batches(*tr, 32), model, SimpleLossCompute(model.generator, criterion, model_opt))
        model.eval()
        test_loss = run_epoch(batches(*va, 32), model, SimpleLossCompute(model.generator, criterion, None))
        if epoch % 8 == 0 or epoch == 29:
            print('epoch {} train_loss {:.4f} test_loss {:.4f}'.format(epoch, train_loss, test_loss))

    model.eval()
    with torch.no_grad():
        val = run_epoch(batches(*va, 256), model, lambda x, y, n: criterion(model.generator(x).view(-1, vocab), y.view(-1)).item())
        new = run_epoch(batches(*fresh, 256), model, lambda x, y, n: criterion(model.generator(x).view(-1, vocab), y.view(-1)).item())
    print('final test-set loss {:.4f}  unseen-data loss {:.4f}  gap {:.4f}'.format(val, new, new - val))


if __name__ == "__main__":
    main()
