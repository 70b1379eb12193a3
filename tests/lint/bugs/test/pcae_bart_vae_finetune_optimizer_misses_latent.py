"""
Shape: A VAE nn.Module that wraps the encoder and decoder of a pretrained BartForConditionalGeneration and adds its own pooler, latent projection and latent-to-hidden layers; a VAE_finetuning(args) function loads tokenizer and BART, builds the VAE from the BART parts, re-points its shared embedding and lm_head at BART's, optionally wraps it in DataParallel, builds text DataLoaders and a cyclical KL-beta schedule, creates transformers.AdamW, and loops epochs and batches (tokenize, forward through the VAE, backward, step, zero_grad) with a separate evaluate helper and best-checkpoint saving.
Bug: AdamW is built from the BART model's parameters(), not the VAE's, so the VAE's own layers (pooler, latent projection, latent-to-decoder linear) get gradients but are never updated.
Thread: https://github.com/ImKeTT/PCAE/issues/5
"""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from tqdm import tqdm
from transformers import AdamW, BartForConditionalGeneration, BartTokenizer

from logger import Logger
from utils import frange_cycle_zero_linear, read_txt


class VAE(nn.Module):
    def __init__(self, enc, dec, tokenizer, args, device):
        super().__init__()
        self.encoder = enc
        self.decoder = dec
        self.config = dec.config
        self.pool = nn.Sequential(nn.Linear(self.config.hidden_size, self.config.hidden_size), nn.Tanh())
        self.nz = args.dim_z
        self.to_latent = nn.Linear(self.config.hidden_size, 2 * self.nz, bias=False)
        self.from_latent = nn.Linear(self.nz, self.config.hidden_size, bias=False)
        self.shared = nn.Embedding(self.config.vocab_size, self.config.d_model, tokenizer.pad_token_id)
        self.lm_head = nn.Linear(self.config.d_model, self.config.vocab_size, bias=False)
        self.prior = torch.distributions.normal.Normal(torch.zeros(self.nz, device=device),
                                                       torch.ones(self.nz, device=device))

    def forward(self, src_ids, labels, decoder_inputs, attention_mask, beta):
        enc = self.encoder(input_ids=src_ids, attention_mask=attention_mask)[0]
        mu, logvar = self.to_latent(self.pool(enc.mean(1))).chunk(2, -1)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        kl = 0.5 * (mu.pow(2) + logvar.exp() - logvar - 1).sum(dim=1)
        mem = self.from_latent(z).unsqueeze(1)
        dec = self.decoder(input_ids=decoder_inputs, encoder_hidden_states=mem)[0]
        logits = self.lm_head(dec)
        rec = nn.functional.cross_entropy(logits.transpose(1, 2), labels, ignore_index=-100, reduction='none').sum(1)
        return rec, kl, rec + beta * kl


def evaluate_vae(loader, vae, tokenizer, device, logger):
    vae.eval()
    recs = []
    with torch.no_grad():
        for texts in loader:
            enc = tokenizer.batch_encode_plus(texts, return_tensors="pt", padding=True)
            ids = enc['input_ids']
            tgt = ids[:, 1:].clone()
            tgt[ids[:, 1:] == tokenizer.pad_token_id] = -100
            rec, kl, _ = vae(ids.to(device), labels=tgt.to(device), decoder_inputs=ids[:, :-1].to(device),
                             attention_mask=enc['attention_mask'].to(device), beta=1.0)
            recs.append(rec.mean().item())
    logger.info("Val Loss Rec : {:.4f}".format(np.mean(recs)))
    return np.mean(recs)


def VAE_finetuning(args):
    device = torch.device(args.gpu[0] if not args.no_gpu else "cpu")
    torch.manual_seed(args.seed)
    tok = BartTokenizer.from_pretrained(args.bart_version)
    bart = BartForConditionalGeneration.from_pretrained(args.bart_version)
    bart.to(device)

    vae = VAE(bart.model.encoder, bart.model.decoder, tok, args, device)
    vae.shared = bart.model.shared
    vae.lm_head = bart.lm_head
    if len(args.gpu) > 1:
        vae = nn.DataParallel(vae, device_ids=list(args.gpu))
    vae.to(device)
    logger = Logger(f"checkpoints/{args.dataset}/BART/log_vae_z{args.dim_z}.txt")

    train_loader = DataLoader(read_txt(f"data/{args.dataset}/train.txt"), batch_size=args.per_gpu_train_batch_size,
                              pin_memory=True, num_workers=args.workers, shuffle=True)
    val_loader = DataLoader(read_txt(f"data/{args.dataset}/valid.txt"), batch_size=args.per_gpu_eval_batch_size,
                            pin_memory=True, num_workers=args.workers, shuffle=True)
    n_iters = args.train_epochs * len(train_loader)
    betas = frange_cycle_zero_linear(n_iters, start=0.0, stop=1.0, n_cycle=4, ratio_increase=0.2, ratio_zero=0.1)
    opt = AdamW(bart.parameters(), lr=args.lr, correct_bias=True)

    best, it = float("inf"), 0
    for epoch in range(args.train_epochs):
        bart.train()
        epoch_losses = []
        for texts in tqdm(train_loader):
            enc = tok.batch_encode_plus(texts, return_tensors="pt", padding=True)
            ids = enc['input_ids']
            tgt = ids[:, 1:].clone()
            tgt[ids[:, 1:] == tok.pad_token_id] = -100
            rec, kl, loss = vae(ids.to(device), labels=tgt.to(device), decoder_inputs=ids[:, :-1].contiguous().to(device),
                                attention_mask=enc['attention_mask'][:, :].to(device), beta=betas[it])
            loss = loss.mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            epoch_losses.append(loss.item())
            it += 1
        logger.info("Train Loss : {:.4f}".format(np.mean(epoch_losses)))
        val = evaluate_vae(val_loader, vae, tok, device, logger)
        if val < best:
            best = val
            torch.save(vae.state_dict(), f"checkpoints/{args.dataset}/BART/best_val_vae.pt")
