"""
Shape: QuestionEncoder(nn.Module) in its own module (embedding + LSTM/GRU chosen by config.qa_mode, an attn MLP scoring each token, projection head); a flat train_entity script builds it from args, copies pretrained vectors, Adam over requires_grad params, MSELoss against entity embeddings, while-True epoch loop with periodic dev eval.
Bug: attention scores of shape (seq_len*batch, 1) are normalised with F.softmax(..., dim=1), i.e. over a size-1 axis, so every attention weight is exactly 1.0.
Thread: https://github.com/DEEP-PolyU/KEQA_WSDM19/issues/2
"""
import torch
import torch.nn.functional as F
from torch import nn

from util import build_iterators, load_entity_embeddings, parse_args


class QuestionEncoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.word_emb = nn.Embedding(num_embeddings=config.words_num, embedding_dim=config.words_dim)
        if not config.train_embed:
            self.word_emb.weight.requires_grad_(False)
        mode = config.qa_mode.upper()
        if mode == "LSTM":
            self.lstm = nn.LSTM(input_size=config.words_dim, hidden_size=config.hidden_size,
                                num_layers=config.num_layer, dropout=config.rnn_dropout, bidirectional=True)
        elif mode == "GRU":
            self.gru = nn.GRU(input_size=config.words_dim, hidden_size=config.hidden_size,
                              num_layers=config.num_layer, dropout=config.rnn_dropout, bidirectional=True)
        self.drop = nn.Dropout(config.rnn_fc_dropout)
        self.tanh = nn.Tanh()
        self.att_mlp = nn.Sequential(
            nn.Linear(2 * config.hidden_size + config.words_dim, config.hidden_size),
            self.tanh,
            nn.Linear(config.hidden_size, 1),
        )
        self.proj_head = nn.Sequential(
            nn.Linear(2 * config.hidden_size + config.words_dim, 2 * config.hidden_size),
            nn.BatchNorm1d(2 * config.hidden_size),
            self.tanh,
            self.drop,
            nn.Linear(2 * config.hidden_size, config.label),
        )

    def forward(self, batch):
        x = self.word_emb(batch.text)
        seq_len, batch_size, words_dim = x.size()
        if hasattr(self, "lstm"):
            outputs, (ht, ct) = self.lstm(x)
        else:
            outputs, ht = self.gru(x)
        outputs = outputs.reshape(-1, outputs.size(-1))
        x = x.view(-1, words_dim)
        att_w = F.softmax(self.att_mlp(torch.cat([x, outputs], dim=1)), dim=1)
        att_ctx = torch.bmm(torch.diag(att_w[:, 0]).unsqueeze(0), outputs.unsqueeze(0))
        outputs = torch.cat((x, att_ctx.squeeze(0)), 1)
        proj = self.proj_head(outputs).view(seq_len, batch_size, -1)
        return nn.functional.normalize(torch.mean(proj, dim=0), dim=1)


args = parse_args()
train_iter, dev_iter, TEXT = build_iterators(args)
ent_vecs = load_entity_embeddings(args)

config = args
config.words_num = len(TEXT.vocab.itos)
config.label = args.embed_dim
config.words_dim = TEXT.vocab.vectors.size(1)
model = QuestionEncoder(config)
model.word_emb.weight.data.copy_(TEXT.vocab.vectors.clone())
if args.cuda:
    moved = model.to(torch.device(f"cuda:{args.gpu}"))
    ent_vecs = ent_vecs.to(torch.device(f"cuda:{args.gpu}"))

trainable = filter(lambda p: p.requires_grad, model.parameters())
adam = torch.optim.Adam(trainable, lr=args.lr, weight_decay=args.weight_decay)
mse = nn.MSELoss()

n_iter = 0
done = False
while not done:
    train_iter.init_epoch()
    for batch in train_iter:
        n_iter += 1
        model.train()
        adam.zero_grad()
        target_vecs = ent_vecs[batch.mid, :]
        loss = mse(model(batch), target_vecs)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=args.clip_gradient)
        adam.step()
        if n_iter % args.dev_every == 0:
            dev_outs = []
            model.eval()
            dev_iter.init_epoch()
            for dev_batch in dev_iter:
                dev_outs.append(model(dev_batch).cpu().data.numpy())
    if n_iter > args.max_iters:
        done = True
