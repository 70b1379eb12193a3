"""A GRU seq2seq chatbot in the style of the PyTorch translation tutorial: an Encoder that embeds one
token at a time into a GRU, an AttentionDecoder with a fixed max_length attention over the encoder
outputs, and a train_step(input_tensor, target_tensor, encoder, decoder, encoder_optimizer,
decoder_optimizer) helper that sums NLLLoss over the target tokens (teacher forcing half of the
time), calls backward once and steps both optimizers. The training loop builds the two SGD
optimizers in the call, but the decoder optimizer is given encoder.parameters() as well: the
encoder is stepped twice per pair and the attention decoder (embedding, attention, GRU, output
layer) is never updated, so the reply loss stays near its starting value.

Thread: https://github.com/zhaoyingjun/chatbot/issues/115
"""
import random

import torch
import torch.nn.functional as F
from torch import nn, optim

SOS_token, EOS_token = 0, 1
MAX_LENGTH = 12
teacher_forcing_ratio = 0.5
criterion = nn.NLLLoss()


class Encoder(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.embedding = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size)

    def forward(self, token, hidden):
        emb = self.embedding(token).view(1, 1, -1)
        return self.gru(emb, hidden)

    def init_hidden(self):
        return torch.zeros(1, 1, self.hidden_size)


class AttentionDecoder(nn.Module):
    def __init__(self, hidden_size, output_size, dropout_p=0.1, max_length=MAX_LENGTH):
        super().__init__()
        self.embedding = nn.Embedding(output_size, hidden_size)
        self.attn = nn.Linear(hidden_size * 2, max_length)
        self.attn_combine = nn.Linear(hidden_size * 2, hidden_size)
        self.dropout = nn.Dropout(dropout_p)
        self.gru = nn.GRU(hidden_size, hidden_size)
        self.out = nn.Linear(hidden_size, output_size)

    def forward(self, token, hidden, encoder_outputs):
        emb = self.dropout(self.embedding(token).view(1, 1, -1))
        weights = F.softmax(self.attn(torch.cat((emb[0], hidden[0]), 1)), dim=1)
        context = torch.bmm(weights.unsqueeze(0), encoder_outputs.unsqueeze(0))
        x = F.relu(self.attn_combine(torch.cat((emb[0], context[0]), 1)).unsqueeze(0))
        x, hidden = self.gru(x, hidden)
        return F.log_softmax(self.out(x[0]), dim=1), hidden, weights


def train_step(input_tensor, target_tensor, encoder, decoder, encoder_optimizer, decoder_optimizer):
    encoder_hidden = encoder.init_hidden()
    encoder_optimizer.zero_grad()
    decoder_optimizer.zero_grad()
    encoder_outputs = torch.zeros(MAX_LENGTH, encoder.hidden_size)
    for ei in range(input_tensor.size(0)):
        out, encoder_hidden = encoder(input_tensor[ei], encoder_hidden)
        encoder_outputs[ei] = out[0, 0]
    decoder_input = torch.tensor([[SOS_token]])
    decoder_hidden = encoder_hidden
    loss = 0
    use_teacher_forcing = random.random() < teacher_forcing_ratio
    for di in range(target_tensor.size(0)):
        decoder_output, decoder_hidden, _ = decoder(decoder_input, decoder_hidden, encoder_outputs)
        loss += criterion(decoder_output, target_tensor[di])
        if use_teacher_forcing:
            decoder_input = target_tensor[di]
        else:
            decoder_input = decoder_output.topk(1)[1].squeeze().detach()
            if decoder_input.item() == EOS_token:
                break
    loss.backward()
    encoder_optimizer.step()
    decoder_optimizer.step()
    return loss.item() / target_tensor.size(0)


def make_pairs(n, vocab, seed):
    """Each 'answer' is the question's words mapped through a fixed table, in reverse order, then EOS."""
    g = torch.Generator().manual_seed(seed)
    table = torch.randperm(vocab - 2, generator=torch.Generator().manual_seed(7)) + 2
    pairs = []
    for _ in range(n):
        k = int(torch.randint(3, 8, (1,), generator=g))
        words = torch.randint(2, vocab, (k,), generator=g)
        src = torch.cat([words, torch.tensor([EOS_token])]).view(-1, 1)
        tgt = torch.cat([table[words.flip(0) - 2], torch.tensor([EOS_token])]).view(-1, 1)
        pairs.append((src, tgt))
    return pairs


def main():
    random.seed(0)
    torch.manual_seed(0)
    vocab, hidden_size, lr = 20, 64, 0.01
    pairs = make_pairs(400, vocab, seed=0)
    encoder1 = Encoder(vocab, hidden_size)
    attn_decoder1 = AttentionDecoder(hidden_size, vocab, dropout_p=0.1)
    total_loss = 0.0
    for i, (inp, targ) in enumerate(pairs):
        batch_loss = train_step(inp, targ, encoder1, attn_decoder1,
                                optim.SGD(encoder1.parameters(), lr=lr),
                                optim.SGD(encoder1.parameters(), lr=lr))
        total_loss += batch_loss
        if (i + 1) % 50 == 0:
            print(f"step {i + 1} avg loss {total_loss / 50:.4f}")
            total_loss = 0.0


if __name__ == "__main__":
    main()
