"""
Shape: main(args) builds the model from a config, wraps optimizer creation in make_optimizer(model, kind, lr, wd) (optimizer_wrapper in the repo), slices pickled training data into batches by index, and every evaluate_every epochs calls evaluate(val_path, ce, model, ...), a module-level function that begins with model.eval().
Bug: evaluate() puts the model in eval mode and nothing calls model.train() afterwards, so later epochs train with dropout off.
Thread: https://github.com/shubhamagarwal92/mmd/issues/14
"""
import math
import pickle as pkl

import numpy as np
import torch
import torch.nn as nn
from torch import optim
from torch.optim import lr_scheduler

import mmd.modules.models as models
import mmd.modules.torch_utils as torch_utils
import mmd.utils.utils as utils


def make_optimizer(model, kind, lr, weight_decay):
    if kind == 'adam':
        return optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    elif kind == 'adadelta':
        return optim.Adadelta(model.parameters(), lr=lr, weight_decay=weight_decay)
    elif kind == 'sgd':
        return optim.SGD(model.parameters(), lr=lr, weight_decay=weight_decay)
    raise NotImplementedError(kind)


def evaluate(val_path, ce, model, conf, n_vocab, use_cuda=False):
    model.eval()
    val_dialogs = pkl.load(open(val_path, 'rb'))
    bsz = conf['data']['batch_size']
    nb = int(math.ceil(float(len(val_dialogs)) / float(bsz)))
    total, words = 0.0, 0.0
    for b in range(nb):
        rows = val_dialogs[b * bsz:(b + 1) * bsz]
        txt_in, txt_len, img_feats, dec_inp, dec_tgt, dec_lens = utils.get_batch_mmd_data(
            rows, conf['data']['start_id'], conf['data']['end_id'], conf['data']['pad_id'],
            conf['data']['image_rep_size'], use_cuda=use_cuda, volatile=True)
        logp = model(txt_in, img_feats, txt_len, dec_inp, dec_tgt, teacher_forcing_ratio=1,
                      decode=False, use_cuda=use_cuda)
        loss = ce(logp.contiguous().view(-1, n_vocab), dec_tgt.view(-1))
        words += dec_lens.float().sum().item()
        total += loss.item()
    avg = total / words
    print('val_dialogs loss %.6f ppl %.4f' % (avg, np.exp(avg)))


def main(args):
    conf = utils.read_json_config(args.config_file_path)
    torch.manual_seed(conf['training']['seed'])
    use_cuda = torch.cuda.is_available()
    n_vocab = len(pkl.load(open(args.vocab_path, 'rb'))[1])

    ModelCls = getattr(models, args.model_type)
    model = ModelCls(src_vocab_size=n_vocab, tgt_vocab_size=n_vocab,
                       dropout_enc=conf['model']['dropout_enc'],
                       dropout_dec=conf['model']['dropout_dec'],
                       dropout_context=conf['model']['dropout_context'])
    model = torch_utils.gpu_wrapper(model, use_cuda=use_cuda)
    optimizer = make_optimizer(model, conf['training']['optimizer'], conf['training']['lr'],
                                  conf['training']['lr_decay'])
    step_sched = lr_scheduler.StepLR(optimizer, step_size=7, gamma=0.1)
    ce = nn.CrossEntropyLoss(ignore_index=conf['data']['pad_id'])
    ce = torch_utils.gpu_wrapper(ce, use_cuda=use_cuda)

    train_dialogs = pkl.load(open(args.train_pkl_path, 'rb'))
    bsz = conf['data']['batch_size']
    nb = int(math.ceil(float(len(train_dialogs)) / float(bsz)))
    for epoch in range(conf['training']['num_epochs']):
        for b in range(nb):
            rows = train_dialogs[b * bsz:(b + 1) * bsz]
            txt_in, txt_len, img_feats, dec_inp, dec_tgt, dec_lens = utils.get_batch_mmd_data(
                rows, conf['data']['start_id'], conf['data']['end_id'], conf['data']['pad_id'],
                conf['data']['image_rep_size'], use_cuda=use_cuda)
            optimizer.zero_grad()
            logp = model(txt_in, img_feats, txt_len, dec_inp, dec_tgt, teacher_forcing_ratio=1,
                          use_cuda=use_cuda)
            loss = ce(logp.contiguous().view(-1, n_vocab), dec_tgt.view(-1))
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), conf['training']['clip_grad'])
            optimizer.step()

        if (epoch + 1) % conf['training']['evaluate_every'] == 0:
            evaluate(args.valid_pkl_path, ce, model, conf, n_vocab, use_cuda=use_cuda)
        if (epoch + 1) % conf['training']['save_every'] == 0:
            torch.save(model.state_dict(), '%s/model_params_%d.pkl' % (args.model_path, epoch + 1))
