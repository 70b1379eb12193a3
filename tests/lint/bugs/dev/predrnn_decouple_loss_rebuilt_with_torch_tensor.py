"""
Shape: recurrent video-prediction nn.Module whose forward returns (preds, loss) with the loss computed inside forward (MSE on frames plus a weighted decoupling term collected in a Python list over time steps and layers); a PredictorWrapper object builds the network, Adam, and a train(seq, mask) method doing zero_grad/forward/backward/step.
Bug: the per-step decoupling losses are collected in a list and combined with torch.mean(torch.tensor(decouple_terms)), which copies the values into a new tensor with no graph, so the decoupling term sends no gradient (decouple_terms.requires_grad is False).
Thread: https://github.com/thuml/predrnn-pytorch/issues/11
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import Adam

from core.layers import SpatioTemporalLSTMCell_memory_decoupling as st_cell


class DecoupledPredRNN(nn.Module):
    def __init__(self, num_layers, num_hidden, configs):  # num_hidden: one width per layer
        super(DecoupledPredRNN, self).__init__()
        self.configs = configs
        self.frame_ch = configs.img_channel * configs.patch_size ** 2
        self.num_layers = num_layers
        self.num_hidden = num_hidden
        w_patch = configs.img_width // configs.patch_size
        self.frame_mse = nn.MSELoss(reduction="mean")
        cell_mods = []
        for i in range(num_layers):
            c_in = self.frame_ch if i == 0 else num_hidden[i - 1]
            cell_mods.append(st_cell.SpatioTemporalLSTMCell(c_in, num_hidden[i], w_patch, configs.filter_size,
                                                configs.stride, configs.layer_norm))
        self.cells = nn.ModuleList(cell_mods)
        self.to_frame = nn.Conv2d(num_hidden[num_layers - 1], self.frame_ch, 1, 1, 0, bias=False)
        self.delta_adapter = nn.Conv2d(num_hidden[0], num_hidden[0], 1, stride=1, padding=0, bias=False)

    def _norm_delta(self, delta):
        return F.normalize(self.delta_adapter(delta).view(delta.shape[0], delta.shape[1], -1), dim=2)

    def forward(self, clip, ss_mask):
        seq = clip.permute(0, 1, 4, 2, 3).contiguous()
        ss_mask = ss_mask.permute(0, 1, 4, 2, 3).contiguous()
        batch, _, _, height, w_patch = seq.shape

        hid, cell, proj_c, proj_m = [], [], [], []
        for i in range(self.num_layers):
            zeros = torch.zeros(batch, self.num_hidden[i], height, w_patch, device=self.configs.device)
            hid.append(zeros)
            cell.append(zeros)
            proj_c.append(zeros)
            proj_m.append(zeros)
        mem = torch.zeros(batch, self.num_hidden[0], height, w_patch, device=self.configs.device)

        preds = []
        decouple_terms = []
        for t in range(0, self.configs.total_length - 1):
            if self.configs.input_length > t:
                net = seq[:, t]
            else:
                m = ss_mask[:, t - self.configs.input_length]
                net = m * seq[:, t] + (1 - m) * x_pred

            hid[0], cell[0], mem, delta_c, delta_m = self.cells[0](net, hid[0], cell[0], mem)
            proj_c[0], proj_m[0] = self._norm_delta(delta_c), self._norm_delta(delta_m)
            for i in range(1, len(self.cells)):
                hid[i], cell[i], mem, delta_c, delta_m = self.cells[i](hid[i - 1], hid[i], cell[i], mem)
                proj_c[i], proj_m[i] = self._norm_delta(delta_c), self._norm_delta(delta_m)

            x_pred = self.to_frame(hid[-1])
            preds.append(x_pred)
            for i in range(self.num_layers):
                decouple_terms.append(torch.mean(torch.abs(torch.cosine_similarity(proj_c[i], proj_m[i], dim=2))))

        decouple_terms = torch.mean(torch.tensor(decouple_terms).to(self.configs.device))
        preds = torch.stack(preds, dim=1).permute(0, 1, 3, 4, 2).contiguous()
        recon = self.frame_mse(preds, clip[:, 1:])
        loss = recon + self.configs.decouple_beta * decouple_terms
        return preds, loss


class PredictorWrapper(object):
    def __init__(self, configs):
        self.configs = configs
        self.num_hidden = list(map(int, configs.num_hidden.split(",")))
        self.num_layers = len(self.num_hidden)  # one ST-LSTM cell per entry
        self.network = DecoupledPredRNN(self.num_layers, self.num_hidden, configs).to(configs.device)
        self.optimizer = Adam(params=self.network.parameters(), lr=configs.lr)

    def train(self, seq, mask):
        clip = torch.as_tensor(seq, dtype=torch.float32, device=self.configs.device)
        mask_t = torch.as_tensor(mask, dtype=torch.float32, device=self.configs.device)
        self.optimizer.zero_grad()
        preds, loss = self.network(clip, mask_t)
        loss.backward()
        self.optimizer.step()
        return loss.item()
