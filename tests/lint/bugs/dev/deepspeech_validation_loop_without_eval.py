"""
Shape: single main() script: SpectrogramDataset train/val sets in AudioDataLoader, DeepSpeech model in DataParallel, then .cuda(), CTCLoss, nesterov SGD; each epoch calls ds_model.train(), runs the batch loop (zero_grad, backward, clip_grad_norm, step), then an in-line validation loop that decodes with ArgMaxDecoder and accumulates WER/CER.
Bug: the validation loop runs the model without ds_model.eval(), so dropout/batch-norm stay in training mode while WER/CER are measured.
Thread: https://github.com/SeanNaren/deepspeech.pytorch/pull/22
"""
import json
import time

import torch
from torch.autograd import Variable
from warpctc_pytorch import CTCLoss

from data.data_loader import AudioDataLoader, SpectrogramDataset
from greedy import ArgMaxDecoder
from ds_model import DeepSpeech


def main(opt):
    ctc = CTCLoss()
    with open(opt.labels_path) as fh:
        labels = str(''.join(json.load(fh)))
    audio_conf = dict(sample_rate=opt.sample_rate, window_size=opt.window_size,
                      window_stride=opt.window_stride, window=opt.window)

    train_set = SpectrogramDataset(audio_conf=audio_conf, manifest_filepath=opt.train_manifest,
                                   labels=labels, normalize=True)
    val_set = SpectrogramDataset(audio_conf=audio_conf, manifest_filepath=opt.val_manifest,
                                 labels=labels, normalize=True)
    train_loader = AudioDataLoader(train_set, batch_size=opt.batch_size, num_workers=opt.num_workers)
    val_loader = AudioDataLoader(val_set, batch_size=opt.batch_size, num_workers=opt.num_workers)

    ds_model = DeepSpeech(rnn_hidden_size=opt.hidden_size, nb_layers=opt.hidden_layers,
                       num_classes=len(labels))
    greedy = ArgMaxDecoder(labels)
    if opt.cuda:
        ds_model = torch.nn.DataParallel(ds_model)
        ds_model = ds_model.cuda()
    optimizer = torch.optim.SGD(ds_model.parameters(), lr=opt.lr, momentum=opt.momentum, nesterov=True)

    for ep in range(opt.epochs):
        ds_model.train()
        t0 = time.time()
        running = 0.0
        for i, batch in enumerate(train_loader):
            feats, ys, frac, y_lens = batch
            feats, ys, y_lens = Variable(feats), Variable(ys), Variable(y_lens)
            if opt.cuda:
                feats = feats.cuda()
            out = ds_model(feats).transpose(0, 1)
            sizes = Variable(frac.mul_(int(out.size(0))).int())
            loss = ctc(out, ys, sizes, y_lens) / feats.size(0)
            running += loss.data.sum()
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm(ds_model.parameters(), max_norm=opt.max_norm)
            optimizer.step()
        print('ep {} avg loss {:.3f} ({:.0f}s)'.format(ep + 1, running / len(train_loader),
                                                          time.time() - t0))

        sum_wer, sum_cer = 0, 0
        for i, batch in enumerate(val_loader):
            feats, ys, frac, y_lens = batch
            feats = Variable(feats)
            split_targets, offset = [], 0
            for n in y_lens:
                split_targets.append(ys[offset:offset + n])
                offset += n
            if opt.cuda:
                feats = feats.cuda()
            out = ds_model(feats).transpose(0, 1)
            sizes = Variable(frac.mul_(int(out.size(0))).int())
            hyps = greedy.decode(out.data, sizes)
            refs = greedy.process_strings(greedy.convert_to_strings(split_targets))
            for h, r in zip(hyps, refs):
                sum_wer += greedy.wer(h, r) / float(len(r.split()))
                sum_cer += greedy.cer(h, r) / float(len(r))
        print('ep {} WER {:.1f} CER {:.1f}'.format(ep + 1, 100 * sum_wer / len(val_loader.dataset),
                                                      100 * sum_cer / len(val_loader.dataset)))
