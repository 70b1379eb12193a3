"""A seq2seq library in the style of IBM's pytorch-seq2seq: a Seq2seq model (GRU EncoderRNN and
DecoderRNN with input dropout and inter-layer dropout, teacher forcing by ratio), an NLLLoss wrapper
with reset/eval_batch/get_loss/backward, a SupervisedTrainer whose _train_batch accumulates the loss
step by step and whose train(model, data, num_epochs, dev_data) evaluates the dev set between
epochs with model.train(False) ... model.train(True) around the Evaluator, and a standalone
Evaluator.evaluate(model, data) used on the test set after training. The Evaluator never calls
model.eval() itself, so the test loss reported at the end is computed with dropout still on (the
trainer left the model in train mode) and is worse than the model's real test loss.

Thread: https://github.com/IBM/pytorch-seq2seq/issues/33
"""
import random

import torch
import torch.nn.functional as F
from torch import nn

SOS, EOS, PAD = 0, 1, 2


class EncoderRNN(nn.Module):
    def __init__(self, vocab_size, hidden_size, n_layers=2, input_dropout_p=0.2, dropout_p=0.2):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, hidden_size)
        self.input_dropout = nn.Dropout(input_dropout_p)
        self.rnn = nn.GRU(hidden_size, hidden_size, n_layers, batch_first=True, dropout=dropout_p)

    def forward(self, input_var):
        return self.rnn(self.input_dropout(self.embedding(input_var)))


class DecoderRNN(nn.Module):
    def __init__(self, vocab_size, hidden_size, n_layers=2, input_dropout_p=0.2, dropout_p=0.2):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, hidden_size)
        self.input_dropout = nn.Dropout(input_dropout_p)
        self.rnn = nn.GRU(hidden_size, hidden_size, n_layers, batch_first=True, dropout=dropout_p)
        self.out = nn.Linear(hidden_size, vocab_size)

    def forward_step(self, token, hidden):
        x, hidden = self.rnn(self.input_dropout(self.embedding(token)), hidden)
        return F.log_softmax(self.out(x.squeeze(1)), dim=-1), hidden

    def forward(self, target_var, encoder_hidden, teacher_forcing_ratio=0.0):
        token = target_var[:, :1]
        hidden, outputs = encoder_hidden, []
        for t in range(target_var.size(1) - 1):
            step_out, hidden = self.forward_step(token, hidden)
            outputs.append(step_out)
            use_tf = random.random() < teacher_forcing_ratio
            token = target_var[:, t + 1:t + 2] if use_tf else step_out.argmax(-1, keepdim=True)
        return outputs, hidden, {"inputs": target_var[:, 1:]}


class Seq2seq(nn.Module):
    def __init__(self, encoder, decoder):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder

    def forward(self, input_variable, target_variable, teacher_forcing_ratio=0.0):
        _, encoder_hidden = self.encoder(input_variable)
        return self.decoder(target_variable, encoder_hidden, teacher_forcing_ratio)


class NLLLoss:
    def __init__(self):
        self.criterion = nn.NLLLoss(reduction="sum")
        self.reset()

    def reset(self):
        self.acc_loss, self.norm_term = 0, 0

    def eval_batch(self, outputs, target):
        self.acc_loss = self.acc_loss + self.criterion(outputs, target)
        self.norm_term += target.numel()

    def get_loss(self):
        return float(self.acc_loss) / max(self.norm_term, 1)

    def backward(self):
        (self.acc_loss / self.norm_term).backward()


class Evaluator:
    def __init__(self, loss=None, batch_size=64):
        self.loss, self.batch_size = loss or NLLLoss(), batch_size

    def evaluate(self, model, data):
        loss = self.loss
        loss.reset()
        with torch.no_grad():
            for src, tgt in batches(data, self.batch_size):
                decoder_outputs, _, other = model(src, tgt)
                for step, step_output in enumerate(decoder_outputs):
                    loss.eval_batch(step_output, other["inputs"][:, step])
        return loss.get_loss()


class SupervisedTrainer:
    def __init__(self, loss, batch_size=32, print_every=20):
        self.loss, self.batch_size, self.print_every = loss, batch_size, print_every
        self.evaluator = Evaluator(loss=NLLLoss(), batch_size=batch_size)
        self.optimizer = None

    def _train_batch(self, input_variable, target_variable, model, teacher_forcing_ratio):
        loss = self.loss
        decoder_outputs, _, other = model(input_variable, target_variable, teacher_forcing_ratio=teacher_forcing_ratio)
        loss.reset()
        for step, step_output in enumerate(decoder_outputs):
            loss.eval_batch(step_output, other["inputs"][:, step])
        model.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.get_loss()

    def train(self, model, data, num_epochs=3, dev_data=None, teacher_forcing_ratio=0.5):
        self.optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
        step = 0
        for epoch in range(1, num_epochs + 1):
            for src, tgt in batches(data, self.batch_size, shuffle=True):
                step += 1
                batch_loss = self._train_batch(src, tgt, model, teacher_forcing_ratio)
                if step % self.print_every == 0:
                    print(f"step {step} train loss {batch_loss:.4f}")
            if dev_data is not None:
                model.train(mode=False)
                dev_loss = self.evaluator.evaluate(model, dev_data)
                model.train(mode=True)
                print(f"finished epoch {epoch}: dev loss {dev_loss:.4f}")
        return model


_shuffle_rng = torch.Generator().manual_seed(3)


def batches(data, batch_size, shuffle=False):
    src, tgt = data
    order = torch.randperm(len(src), generator=_shuffle_rng) if shuffle else torch.arange(len(src))
    for i in range(0, len(src), batch_size):
        idx = order[i:i + batch_size]
        yield src[idx], tgt[idx]


def reverse_task(n, vocab, length, seed):
    """The library's toy task: the target is the source reversed, framed by SOS ... EOS."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, vocab, (n, length), generator=g)
    tgt = torch.cat([torch.full((n, 1), SOS), src.flip(1), torch.full((n, 1), EOS)], dim=1)
    return src, tgt


def main():
    random.seed(0)
    torch.manual_seed(0)
    vocab, hidden = 16, 64
    train_data = reverse_task(1280, vocab, 6, seed=0)
    dev_data = reverse_task(256, vocab, 6, seed=1)
    test_data = reverse_task(256, vocab, 6, seed=2)
    seq2seq = Seq2seq(EncoderRNN(vocab, hidden), DecoderRNN(vocab, hidden))
    trainer = SupervisedTrainer(loss=NLLLoss(), batch_size=32)
    seq2seq = trainer.train(seq2seq, train_data, num_epochs=3, dev_data=dev_data, teacher_forcing_ratio=0.5)
    evaluator = Evaluator(loss=NLLLoss(), batch_size=64)
    print(f"test loss {evaluator.evaluate(seq2seq, test_data):.4f}")


if __name__ == "__main__":
    main()
