"""
Shape: the SQuAD fine-tuning example script of pytorch-transformers: train(args, train_dataset, model, tokenizer) builds a RandomSampler/DistributedSampler DataLoader, computes t_total from max_steps or from len(loader) // gradient_accumulation_steps * num_train_epochs, builds AdamW over two weight-decay groups and a WarmupLinearSchedule(optimizer, warmup_steps, t_total), optionally wraps with apex amp, DataParallel and DistributedDataParallel, then runs trange epochs over tqdm batches with a dict of inputs, loss scaling for multi-GPU and accumulation, grad clipping, and an accumulation branch that updates the weights, logs to TensorBoard, and saves checkpoints.
Bug: inside the accumulation branch scheduler.step() is called before optimizer.step(), so every update uses the next value of the warmup/linear-decay schedule and the first value is skipped (PyTorch >= 1.1 warns about it).
Thread: https://github.com/huggingface/transformers/pull/1136
"""
import os

import torch
from tensorboardX import SummaryWriter
from torch.utils.data import DataLoader, RandomSampler
from torch.utils.data.distributed import DistributedSampler
from tqdm import tqdm, trange

from pytorch_transformers import AdamW, WarmupLinearSchedule

from utils_squad import evaluate, set_seed


def train(args, train_dataset, model, tokenizer):
    if args.local_rank in [-1, 0]:
        tb_writer = SummaryWriter()

    args.train_batch_size = args.per_gpu_train_batch_size * max(1, args.n_gpu)
    sampler = RandomSampler(train_dataset) if args.local_rank == -1 else DistributedSampler(train_dataset)
    loader = DataLoader(train_dataset, sampler=sampler, batch_size=args.train_batch_size)

    if args.max_steps > 0:
        t_total = args.max_steps
        args.num_train_epochs = args.max_steps // (len(loader) // args.gradient_accumulation_steps) + 1
    else:
        t_total = len(loader) // args.gradient_accumulation_steps * args.num_train_epochs

    no_decay = ['bias', 'LayerNorm.weight']
    grouped = [
        {'params': [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
         'weight_decay': args.weight_decay},
        {'params': [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
         'weight_decay': 0.0},
    ]
    optimizer = AdamW(grouped, lr=args.learning_rate, eps=args.adam_epsilon)
    scheduler = WarmupLinearSchedule(optimizer, warmup_steps=args.warmup_steps, t_total=t_total)
    if args.fp16:
        from apex import amp
        model, optimizer = amp.initialize(model, optimizer, opt_level=args.fp16_opt_level)
    if args.n_gpu > 1:
        model = torch.nn.DataParallel(model)
    if args.local_rank != -1:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[args.local_rank],
                                                          output_device=args.local_rank,
                                                          find_unused_parameters=True)

    global_step = 0
    tr_loss, logging_loss = 0.0, 0.0
    model.zero_grad()
    set_seed(args)
    for _ in trange(int(args.num_train_epochs), desc="Epoch", disable=args.local_rank not in [-1, 0]):
        for step, batch in enumerate(tqdm(loader, desc="Iteration", disable=args.local_rank not in [-1, 0])):
            model.train()
            batch = tuple(t.to(args.device) for t in batch)
            inputs = {'input_ids': batch[0], 'attention_mask': batch[1],
                      'token_type_ids': None if args.model_type == 'xlm' else batch[2],
                      'start_positions': batch[3], 'end_positions': batch[4]}
            if args.model_type in ['xlnet', 'xlm']:
                inputs.update({'cls_index': batch[5], 'p_mask': batch[6]})
            loss = model(**inputs)[0]
            if args.n_gpu > 1:
                loss = loss.mean()
            if args.gradient_accumulation_steps > 1:
                loss = loss / args.gradient_accumulation_steps

            if args.fp16:
                with amp.scale_loss(loss, optimizer) as scaled_loss:
                    scaled_loss.backward()
                torch.nn.utils.clip_grad_norm_(amp.master_params(optimizer), args.max_grad_norm)
            else:
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)

            tr_loss += loss.item()
            if (step + 1) % args.gradient_accumulation_steps == 0:
                scheduler.step()
                optimizer.step()
                model.zero_grad()
                global_step += 1

                if args.local_rank in [-1, 0] and args.logging_steps > 0 and global_step % args.logging_steps == 0:
                    if args.local_rank == -1 and args.evaluate_during_training:
                        for key, value in evaluate(args, model, tokenizer).items():
                            tb_writer.add_scalar('eval_{}'.format(key), value, global_step)
                    tb_writer.add_scalar('lr', scheduler.get_lr()[0], global_step)
                    tb_writer.add_scalar('loss', (tr_loss - logging_loss) / args.logging_steps, global_step)
                    logging_loss = tr_loss

                if args.local_rank in [-1, 0] and args.save_steps > 0 and global_step % args.save_steps == 0:
                    out_dir = os.path.join(args.output_dir, 'checkpoint-{}'.format(global_step))
                    os.makedirs(out_dir, exist_ok=True)
                    to_save = model.module if hasattr(model, 'module') else model
                    to_save.save_pretrained(out_dir)
                    torch.save(args, os.path.join(out_dir, 'training_args.bin'))

            if 0 < args.max_steps < global_step:
                break
        if 0 < args.max_steps < global_step:
            break

    if args.local_rank in [-1, 0]:
        tb_writer.close()
    return global_step, tr_loss / global_step
