"""
Shape: package split into networks (Encoder RNN, DualEncoder whose final_layer attribute is an nn.Softmax applied in forward), a SupervisedTrainer class whose __init__ takes loss_func=CrossEntropyLoss() as a default argument and whose _train_batch/_train_epoches/train methods run the loop with the optimizer on self, and a sample script that builds CrossEntropyLoss().cuda(), the encoders and the trainer.
Bug: DualEncoder.forward returns self.final_layer(logits) (softmax probabilities) and the trainer's CrossEntropyLoss is applied to those outputs, so softmax is applied twice.
Thread: https://github.com/IBM/dstc-noesis/issues/18
"""
import random

import torch
from torch import nn, optim
from torch.nn import CrossEntropyLoss

from dataset.dataset import Dataset


class Encoder(nn.Module):
    def __init__(self, vocab_size, max_len, hidden_size, input_dropout_p=0, dropout_p=0, n_layers=1,
                 bidirectional=False, rnn_cell_type="gru", variable_lengths=False):
        super(Encoder, self).__init__()
        self.hidden_size = hidden_size
        self.n_layers = n_layers
        self.bidirectional = bidirectional
        self.variable_lengths = variable_lengths
        self.rnn_cell_type = rnn_cell_type.lower()
        cell = nn.LSTM if self.rnn_cell_type == "lstm" else nn.GRU
        self.input_dropout = nn.Dropout(p=input_dropout_p)
        self.embedding = nn.Embedding(vocab_size, hidden_size)
        self.rnn = cell(hidden_size, hidden_size, n_layers, batch_first=True, bidirectional=bidirectional, dropout=dropout_p)

    def forward(self, tokens, lengths=None):
        emb = self.input_dropout(self.embedding(tokens))
        if self.variable_lengths:
            emb = nn.utils.rnn.pack_padded_sequence(emb, lengths, batch_first=True, enforce_sorted=False)
        out, hidden = self.rnn(emb)
        if self.variable_lengths:
            out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
        return out, hidden


class DualEncoder(nn.Module):
    def __init__(self, context, response):
        super(DualEncoder, self).__init__()
        self.context = context
        self.response = response
        c_h = context.hidden_size * (2 if context.bidirectional else 1)
        r_h = response.hidden_size * (2 if response.bidirectional else 1)
        if torch.cuda.is_available():
            self.M = torch.randn([c_h, r_h], requires_grad=True).cuda()
        else:
            self.M = torch.randn([c_h, r_h], requires_grad=True)
        self.final_layer = nn.Softmax()

    def forward(self, ctx, resps, ctx_len, resp_len):
        batch, n_resp, seq_len = resps.size()
        _, h_c = self.context(ctx, ctx_len)
        _, h_r = self.response(resps.reshape([-1, seq_len]), resp_len.reshape([-1]))
        logits = torch.matmul(torch.matmul(h_c.view(self.context.n_layers, 1, -1), self.M),
                              h_r.view(self.response.n_layers, n_resp, -1).transpose(1, 2)).squeeze()
        output = self.final_layer(logits)
        return output


class SupervisedTrainer(object):
    def __init__(self, expt_dir="experiment", loss_func=CrossEntropyLoss(), batch_size=64, random_seed=None, print_every=1000):
        if random_seed is not None:
            random.seed(random_seed)
            torch.manual_seed(random_seed)
        self.loss_func = loss_func
        self.optimizer = None
        self.batch_size = batch_size
        self.print_every = print_every
        self.expt_dir = expt_dir

    def _train_batch(self, ctx, resps, target, model, ctx_len, resp_len):
        loss_func = self.loss_func
        outputs = model(ctx, resps, ctx_len, resp_len)
        if len(outputs.size()) == 1:
            outputs = outputs.unsqueeze(0)
        loss = loss_func(outputs, target)
        model.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss

    def _train_epoches(self, data, model, n_epochs, start_epoch, batch_size=2):
        device = "cuda" if torch.cuda.is_available() else "cpu"
        for epoch in range(start_epoch, n_epochs + 1):
            model.train(True)
            epoch_total = 0.0
            for batch in data.make_batches(batch_size):
                ctx, resps, target, ctx_len, resp_len = (torch.tensor(b).to(device) for b in batch[:5])
                loss = self._train_batch(ctx, resps, target, model, ctx_len, resp_len)
                epoch_total += loss.item()

    def train(self, model, data, batch_size=1, num_epochs=5, optimizer=None):
        if optimizer is None:
            optimizer = optim.Adam(model.parameters())
        self.optimizer = optimizer
        self._train_epoches(data, model, num_epochs, 1, batch_size=batch_size)


if __name__ == "__main__":
    train_data = Dataset.from_file("train.json")
    vocab = train_data.vocab
    loss_func = CrossEntropyLoss()
    if torch.cuda.is_available():
        loss_func.cuda()
    ctx_enc = Encoder(vocab.get_vocab_size(), 500, 128, bidirectional=True, variable_lengths=True)
    resp_enc = Encoder(vocab.get_vocab_size(), 500, 128, bidirectional=True, variable_lengths=True)
    dual_encoder = DualEncoder(ctx_enc, resp_enc)
    if torch.cuda.is_available():
        dual_encoder.cuda()
    for p in dual_encoder.parameters():
        p.data.uniform_(-0.08, 0.08)
    trainer = SupervisedTrainer(loss_func=loss_func, batch_size=1, print_every=100)
    trainer.train(dual_encoder, train_data, batch_size=1, num_epochs=20, optimizer=None)
