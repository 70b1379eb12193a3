"""A visual-dialog challenge starter: a late-fusion encoder turns (image, question, history) into
a vector and a discriminative decoder scores the 100 candidate answers of each question with a
dot product, then applies nn.LogSoftmax(dim=0) to the [batch x options] score matrix; an NLLLoss
on the index of the ground-truth option trains it from a train loop over a batch iterator. The
normalisation runs over the batch axis instead of over the answer options.

Thread: https://github.com/batra-mlp-lab/visdial-challenge-starter-pytorch/issues/1
"""
import torch
from torch import nn


class LateFusionEncoder(nn.Module):
    def __init__(self, img_feature_size, word_dim, hidden):
        super().__init__()
        self.ques_rnn = nn.GRU(word_dim, hidden, batch_first=True)
        self.hist_rnn = nn.GRU(word_dim, hidden, batch_first=True)
        self.fusion = nn.Linear(img_feature_size + 2 * hidden, hidden)

    def forward(self, batch):
        _, q = self.ques_rnn(batch["ques"])
        _, h = self.hist_rnn(batch["hist"])
        fused = torch.cat([batch["img_feat"], q[-1], h[-1]], dim=1)
        return torch.tanh(self.fusion(fused))


class DiscriminativeDecoder(nn.Module):
    def __init__(self, word_dim, hidden):
        super().__init__()
        self.option_rnn = nn.GRU(word_dim, hidden, batch_first=True)
        self.log_softmax = nn.LogSoftmax(dim=0)

    def forward(self, enc_out, batch):
        options = batch["opt"]                        # (batch, num_options, len, word_dim)
        b, n, length, d = options.shape
        _, opt_h = self.option_rnn(options.reshape(b * n, length, d))
        opt_embeds = opt_h[-1].view(b, n, -1)
        scores = torch.bmm(opt_embeds, enc_out.unsqueeze(2)).squeeze(2)   # (batch, num_options)
        return self.log_softmax(scores)


class EncoderDecoderModel(nn.Module):
    def __init__(self, encoder, decoder):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder

    def forward(self, batch):
        return self.decoder(self.encoder(batch), batch)


def visdial_batches(n_batches, batch_size, num_options=100, seed=0):
    g = torch.Generator().manual_seed(seed)
    word_dim, img_dim = 16, 32
    proj = torch.randn(img_dim, word_dim, generator=torch.Generator().manual_seed(9)) / img_dim ** 0.5
    batches = []
    for _ in range(n_batches):
        img = torch.randn(batch_size, img_dim, generator=g)
        ques = torch.randn(batch_size, 5, word_dim, generator=g)
        hist = torch.randn(batch_size, 6, word_dim, generator=g)
        opt = torch.randn(batch_size, num_options, 4, word_dim, generator=g)
        ans_ind = torch.randint(0, num_options, (batch_size,), generator=g)
        answer_word = (img @ proj) + 0.5 * ques.mean(1)
        opt[torch.arange(batch_size), ans_ind] = answer_word[:, None, :] + 0.3 * torch.randn(
            batch_size, 4, word_dim, generator=g)
        batches.append({"img_feat": img, "ques": ques, "hist": hist, "opt": opt, "ans_ind": ans_ind})
    return batches


def mean_rank(model, batches):
    model.eval()
    ranks = []
    with torch.no_grad():
        for batch in batches:
            scores = model(batch)
            gt = scores.gather(1, batch["ans_ind"][:, None])
            ranks.append((scores > gt).sum(1).float() + 1)
    return torch.cat(ranks).mean().item()


def main():
    torch.manual_seed(0)
    model = EncoderDecoderModel(LateFusionEncoder(32, 16, 64), DiscriminativeDecoder(16, 64))
    criterion = nn.NLLLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    train_batches = visdial_batches(25, 16, seed=0)
    val_batches = visdial_batches(4, 16, seed=1)
    for epoch in range(3):
        model.train()
        for i, batch in enumerate(train_batches):
            optimizer.zero_grad()
            dec_out = model(batch)
            cur_loss = criterion(dec_out, batch["ans_ind"])
            cur_loss.backward()
            optimizer.step()
            if i % 8 == 0:
                print(f"[Ep: {epoch}][Iter: {i}][Loss: {cur_loss.item():.4f}]")
        print(f"epoch {epoch} val mean rank of the true answer among 100: {mean_rank(model, val_batches):.1f}")


if __name__ == "__main__":
    main()
