"""
Shape: A ReformerTrainer class whose train() method builds a fairseq Adafactor over self.model,
loops epochs -> dataloader steps -> documents inside each batch, masks tokens through self helpers,
and divides the loss by gradient_accumulation_steps before backward.
Bug: the loss is scaled for accumulation, but optimizer.step() and self.model.zero_grad() run after
every single document, so nothing is ever accumulated and each update uses a 1/N-sized gradient.
Thread: https://github.com/lucidrains/reformer-pytorch/issues/97
"""
import os
import logging
from datetime import datetime

import torch
import torch.nn as nn
from tqdm import tqdm
from fairseq.optim.adafactor import Adafactor


class ReformerTrainer(object):

    def __init__(self, model, tokenizer, device, n_gpu=1, log_dir="logs"):
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self.n_gpu = n_gpu
        self.log_dir = log_dir

    def mask_tokens(self, inputs, mlm_probability=0.15):
        labels = inputs.clone()
        prob = torch.full(labels.shape, mlm_probability)
        picked = torch.bernoulli(prob).bool()
        labels[~picked] = -100
        inputs[picked] = self.tokenizer.mask_token_id
        return inputs, labels

    def _encode_docs(self, docs):
        encoded = [
            self.tokenizer.encode(doc, add_special_tokens=True,
                                  max_length=self.tokenizer.max_len,
                                  pad_to_max_length=True, return_tensors="pt")
            for doc in docs
        ]
        return torch.cat(encoded)

    def train(self, epochs, train_loader, eval_loader, log_every, save_every,
              ckpt_dir=None, gradient_accumulation_steps=1):
        opt = Adafactor(self.model.parameters())
        criterion = nn.CrossEntropyLoss()
        history = {}
        n_updates = 0
        window_steps = 0
        window_loss = 0.0

        if ckpt_dir is not None and os.path.isfile(f"{ckpt_dir}/model_state_dict.pt"):
            self.model.load_state_dict(torch.load(f"{ckpt_dir}/model_state_dict.pt",
                                                  map_location=self.device))
            opt.load_state_dict(torch.load(f"{ckpt_dir}/optimizer_state_dict.pt"))

        self.model.train()
        if self.n_gpu > 1:
            self.model = nn.DataParallel(self.model)
        self.model.to(self.device)

        for epoch in tqdm(range(epochs), desc="epochs"):
            logging.info(f"{datetime.now()} | epoch {epoch}")
            for step, batch in enumerate(train_loader):
                for docs in batch:
                    ids = self._encode_docs(docs)
                    ids, targets = self.mask_tokens(ids)
                    ids, targets = ids.to(self.device), targets.to(self.device)
                    logits = self.model(ids)

                    keep = targets != -100
                    logits = logits[keep].view(-1, self.tokenizer.vocab_size)
                    targets = targets[keep].view(-1)

                    loss = criterion(logits, targets)
                    if gradient_accumulation_steps > 1:
                        loss /= gradient_accumulation_steps

                    loss.backward()
                    opt.step()
                    self.model.zero_grad()

                    window_loss += loss.item()
                    history[n_updates] = loss.item()
                    window_steps += 1
                    n_updates += 1

                    if n_updates % log_every == 0:
                        logging.info(f"train loss {window_loss / window_steps:.4f} @ {n_updates}")
                        window_loss = 0.0
                        window_steps = 0

                    if n_updates % save_every == 0:
                        self.evaluate(eval_loader)
                        to_save = self.model.module if hasattr(self.model, "module") else self.model
                        torch.save(to_save.state_dict(), f"{ckpt_dir}/model_state_dict.pt")
                        torch.save(opt.state_dict(), f"{ckpt_dir}/optimizer_state_dict.pt")

        return self.model

    def evaluate(self, loader):
        self.model.eval()
        with torch.no_grad():
            for batch in loader:
                for docs in batch:
                    ids = self._encode_docs(docs).to(self.device)
                    self.model(ids)
        self.model.train()
