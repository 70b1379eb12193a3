"""
Shape: NERTrainer class; train() calls multiModal_before_train() or bert_before_train() to build self.opt/self.sched, then loops epochs and batches through a run_step(bt) helper with backward/step/sched.step/zero_grad; multiModal_before_train() assembles AdamW param-group dicts by name filters (bert, prompt convs/gates, crf+fc) before freezing the image backbone.
Bug: the third param-group dict (crf and fc parameters, lr 5e-2) is filled but never appended to the list passed to AdamW, so the CRF and classifier layers are never updated.
Thread: https://github.com/zjunlp/HVPNeT/issues/5
"""
import torch
from torch import optim
from tqdm import tqdm
from transformers.optimization import get_linear_schedule_with_warmup


class TrainerBase(object):
    def train(self):
        raise NotImplementedError

    def dev_eval(self):
        raise NotImplementedError


class NERTrainer(TrainerBase):
    def __init__(self, train_batches=None, dev_batches=None, net=None, tag_map=None, hp=None, log=None):
        self.train_batches = train_batches
        self.dev_batches = dev_batches
        self.net = net
        self.tag_map = tag_map
        self.log = log
        self.hp = hp
        self.opt = None
        self.best_dev_f1 = 0
        if self.train_batches is not None:
            self.total_steps = len(self.train_batches) * hp.num_epochs
        self.step = 0

    def train(self):
        if self.hp.use_prompt:
            self.multiModal_before_train()
        else:
            self.bert_before_train()
        self.step = 0
        self.net.train()
        if self.hp.load_path is not None:
            self.net.load_state_dict(torch.load(self.hp.load_path))

        with tqdm(total=self.total_steps, leave=False) as bar:
            running = 0.0
            for ep in range(1, self.hp.num_epochs + 1):
                for bt in self.train_batches:
                    self.step += 1
                    bt = (t.to(self.hp.device) if isinstance(t, torch.Tensor) else t for t in bt)
                    attn, labels, logits, loss = self.run_step(bt, mode="train")
                    running += loss.detach().cpu().item()
                    loss.backward()
                    self.opt.step()
                    self.sched.step()
                    self.opt.zero_grad()
                    bar.update(1)
                if ep >= self.hp.eval_begin_epoch:
                    self.dev_eval(ep)
            if torch.cuda.is_available():
                torch.cuda.empty_cache()

    def dev_eval(self, ep):
        self.net.eval()
        with torch.inference_mode():
            for bt in self.dev_batches:
                bt = (t.to(self.hp.device) if isinstance(t, torch.Tensor) else t for t in bt)
                self.run_step(bt, mode="dev")
        self.net.train()

    def run_step(self, bt, mode="train"):
        if self.hp.use_prompt:
            tok_ids, seg_ids, attn_mask, labels, img, aux_img = bt
        else:
            img, aux_img = None, None
            tok_ids, seg_ids, attn_mask, labels = bt
        out = self.net(input_ids=tok_ids, attention_mask=attn_mask, token_type_ids=seg_ids,
                       labels=labels, images=img, aux_imgs=aux_img)
        return attn_mask, labels, out.logits, out.loss

    def bert_before_train(self):
        self.opt = optim.AdamW(self.net.parameters(), lr=self.hp.lr)
        self.net.to(self.hp.device)
        self.sched = get_linear_schedule_with_warmup(optimizer=self.opt,
                                                         num_warmup_steps=self.hp.warmup_ratio * self.total_steps,
                                                         num_training_steps=self.total_steps)

    def multiModal_before_train(self):
        groups = []
        grp = {'lr': self.hp.lr, 'weight_decay': 1e-2, 'params': []}
        for n, p in self.net.named_parameters():
            if 'bert' in n:
                grp['params'].append(p)
        groups.append(grp)

        grp = {'lr': self.hp.lr, 'weight_decay': 1e-2, 'params': []}
        for n, p in self.net.named_parameters():
            if 'encoder_conv' in n or 'gates' in n:
                grp['params'].append(p)
        groups.append(grp)

        grp = {'lr': 5e-2, 'weight_decay': 1e-2, 'params': []}
        for n, p in self.net.named_parameters():
            if 'crf' in n or n.startswith('fc'):
                grp['params'].append(p)

        self.opt = optim.AdamW(groups)

        for n, p in self.net.named_parameters():
            if 'image_model' in n:
                p.requires_grad = False

        self.sched = get_linear_schedule_with_warmup(optimizer=self.opt,
                                                         num_warmup_steps=self.hp.warmup_ratio * self.total_steps,
                                                         num_training_steps=self.total_steps)
        self.net.to(self.hp.device)
