"""
Shape: video-saliency model `SalEMA(nn.Module)` built from a pretrained SalGAN encoder/decoder split into a salgan list, with an exponential-moving-average temporal state blended by a learnable alpha; the constructor takes a `dropout` boolean from the command-line parser, and forward(input_, prev_state) applies functional dropout2d to the encoder features when that flag is set; a train() helper steps Adam over clips, and an inference script builds the model from get_inference_parser() arguments, loads weights and calls model.eval().
Bug: dropout is switched by the constructor flag instead of the module's training mode: forward calls torch.nn.functional.dropout2d(x) with its default training=True, so model.eval() does not turn it off and inference keeps dropping feature maps whenever the flag was left at its default of True.
Thread: https://github.com/Linardos/SalEMA/issues/6
"""
import argparse

import torch
import torch.nn as nn
from torch.nn.functional import dropout2d, interpolate

from salgan_utils import load_salgan_layers


def get_inference_parser():
    parser = argparse.ArgumentParser()
    parser.add_argument('-pt_model', type=str, default='SalEMA30.pt')
    parser.add_argument('-alpha', type=float, default=0.1)
    parser.add_argument('-ema_loc', type=int, default=30)
    parser.add_argument('-dropout', type=bool, default=True)
    parser.add_argument('-residual', type=bool, default=False)
    return parser


class SalEMA(nn.Module):
    def __init__(self, alpha=0.1, ema_loc=30, residual=False, dropout=True):
        super().__init__()
        self.dropout = dropout
        self.residual = residual
        self.ema_loc = ema_loc
        encoder, decoder = load_salgan_layers()
        self.salgan = nn.ModuleList(list(encoder) + list(decoder))
        self.alpha = nn.Parameter(torch.tensor([alpha]))
        self.sigmoid = nn.Sigmoid()

    def forward(self, input_, prev_state=None):
        x = input_
        for i in range(self.ema_loc):
            x = self.salgan[i](x)

        if self.dropout is True:
            x = dropout2d(x)

        if prev_state is None:
            current_state = self.sigmoid(self.alpha) * x
        else:
            current_state = self.sigmoid(self.alpha) * x + (1 - self.sigmoid(self.alpha)) * prev_state
        x = current_state + input_ if self.residual else current_state

        for i in range(self.ema_loc, len(self.salgan)):
            x = self.salgan[i](x)
        return current_state, x


def train(loader, model, criterion, optimizer, device):
    model.train()
    for clip, gt_maps in loader:
        state = None
        optimizer.zero_grad()
        total = 0.0
        for t in range(clip.size(1)):
            frame = clip[:, t].to(device)
            target = gt_maps[:, t].to(device)
            state, pred = model(frame, state)
            total = total + criterion(pred, target)
        total.backward()
        optimizer.step()


def run_inference(frames, device='cuda'):
    args = get_inference_parser().parse_args()
    model = SalEMA(alpha=args.alpha, ema_loc=args.ema_loc, residual=args.residual, dropout=args.dropout)
    model.load_state_dict(torch.load(args.pt_model)['state_dict'])
    model = model.to(device)
    model.eval()
    maps = []
    state = None
    with torch.no_grad():
        for frame in frames:
            state, sal = model(frame.unsqueeze(0).to(device), state)
            maps.append(interpolate(sal, size=frame.shape[-2:]).squeeze().cpu())
    return maps


def build_training(args, train_loader, device='cuda'):
    model = SalEMA(alpha=args.alpha, ema_loc=args.ema_loc, residual=args.residual, dropout=args.dropout).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    criterion = nn.BCELoss()
    for epoch in range(args.epochs):
        train(train_loader, model, criterion, optimizer, device)
