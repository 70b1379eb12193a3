"""
Shape: change-detection project: main_cd.py parses args (optimizer chosen by name, adamw in the run scripts), builds loaders and a CDTrainer, and calls train_models(); CDTrainer.__init__ builds net_G via define_G and picks SGD/Adam/AdamW from args.optimizer; train_models() loops epochs calling _forward_pass(batch), zero_grad, _backward_G() (multi-scale weighted pixel loss, backward) and step, then evaluates.
Bug: to fit 1024x1024 images the user made every tensor half precision with torch.set_default_tensor_type(torch.HalfTensor), so the network's parameters are fp16 and are updated by Adam/AdamW with default eps; G_loss became nan.
Thread: https://github.com/wgcban/ChangeFormer/issues/91
"""
import os
from argparse import ArgumentParser

import torch
import torch.nn.functional as F
import torch.optim as optim

import utils
from models.losses import cross_entropy
from models.networks import define_G, get_scheduler

torch.set_default_tensor_type(torch.HalfTensor)


class CDTrainer:
    def __init__(self, args, dataloaders):
        self.args = args
        self.dataloaders = dataloaders
        self.net_G = define_G(args=args, gpu_ids=args.gpu_ids)
        self.device = torch.device("cuda:%s" % args.gpu_ids[0] if torch.cuda.is_available() and len(args.gpu_ids) > 0 else "cpu")
        self.lr = args.lr
        if args.optimizer == "sgd":
            self.optimizer_G = optim.SGD(self.net_G.parameters(), lr=self.lr, momentum=0.9, weight_decay=5e-4)
        elif args.optimizer == "adam":
            self.optimizer_G = optim.Adam(self.net_G.parameters(), lr=self.lr, weight_decay=0)
        elif args.optimizer == "adamw":
            self.optimizer_G = optim.AdamW(self.net_G.parameters(), lr=self.lr, betas=(0.9, 0.999), weight_decay=0.01)
        self.exp_lr_scheduler_G = get_scheduler(self.optimizer_G, args)
        self.max_num_epochs = args.max_epochs
        self.multi_scale_train = args.multi_scale_train
        self.weights = tuple(args.multi_pred_weights)
        self._pxl_loss = cross_entropy

    def _forward_pass(self, batch):
        self.batch = batch
        a = batch["A"].to(self.device)
        b = batch["B"].to(self.device)
        self.G_pred = self.net_G(a, b)
        self.G_final_pred = self.G_pred[-1]

    def _backward_G(self):
        gt = self.batch["L"].to(self.device).float()
        if self.multi_scale_train == "True":
            total = 0.0
            for k, pred in enumerate(self.G_pred):
                if pred.size(2) != gt.size(2):
                    total = total + self.weights[k] * self._pxl_loss(pred, F.interpolate(gt, size=pred.size(2), mode="nearest"))
                else:
                    total = total + self.weights[k] * self._pxl_loss(pred, gt)
            self.G_loss = total
        else:
            self.G_loss = self._pxl_loss(self.G_pred[-1], gt)
        self.G_loss.backward()

    def train_models(self):
        for self.epoch_id in range(0, self.max_num_epochs):
            self.net_G.train()
            for self.batch_id, batch in enumerate(self.dataloaders["train"], 0):
                self._forward_pass(batch)
                self.optimizer_G.zero_grad()
                self._backward_G()
                self.optimizer_G.step()
            self.exp_lr_scheduler_G.step()
            self.net_G.eval()
            for self.batch_id, batch in enumerate(self.dataloaders["val"], 0):
                with torch.no_grad():
                    self._forward_pass(batch)


def train(args):
    dataloaders = utils.get_loaders(args)
    model = CDTrainer(args=args, dataloaders=dataloaders)
    model.train_models()


if __name__ == "__main__":
    parser = ArgumentParser()
    parser.add_argument("--gpu_ids", type=str, default="0")
    parser.add_argument("--checkpoint_root", default="checkpoints", type=str)
    parser.add_argument("--project_name", default="ChangeFormer", type=str)
    parser.add_argument("--data_name", default="LEVIR", type=str)
    parser.add_argument("--batch_size", default=8, type=int)
    parser.add_argument("--img_size", default=256, type=int)
    parser.add_argument("--n_class", default=2, type=int)
    parser.add_argument("--net_G", default="ChangeFormerV6", type=str)
    parser.add_argument("--multi_scale_train", default=False, type=str)
    parser.add_argument("--multi_pred_weights", nargs="+", type=float, default=[0.5, 0.5, 0.5, 0.8, 1.0])
    parser.add_argument("--optimizer", default="sgd", type=str)
    parser.add_argument("--lr", default=0.01, type=float)
    parser.add_argument("--max_epochs", default=1000, type=int)
    parser.add_argument("--lr_policy", default="linear", type=str)
    args = parser.parse_args()
    utils.get_device(args)
    args.checkpoint_dir = os.path.join(args.checkpoint_root, args.project_name)
    os.makedirs(args.checkpoint_dir, exist_ok=True)
    train(args)
