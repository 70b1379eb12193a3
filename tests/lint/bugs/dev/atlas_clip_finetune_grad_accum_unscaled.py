"""
Shape: finetune(rank, args) function spawned per GPU: builds a CLIP ImageClassifier (frozen head), wraps it in DistributedDataParallel, picks LabelSmoothing or CrossEntropyLoss, AdamW over requires_grad params, a cosine_lr schedule function called with the step index, GradScaler; the batch loop runs autocast forward, scaler.scale(loss).backward() every batch and clips/steps/updates/zero_grads only every args.num_grad_accumulation batches; __main__ sets num_grad_accumulation to 2 for ViT-L-14.
Bug: with num_grad_accumulation > 1 each micro-batch loss is backpropagated at full size, so the accumulated gradient is the sum rather than the mean over micro-batches.
Thread: https://github.com/fredzzhang/atlas/pull/26
"""
import os
import time

import torch
from torch.cuda.amp import GradScaler

from src.args import parse_arguments
from src.datasets.common import get_dataloader, maybe_dictionarize
from src.datasets.registry import get_dataset
from src.distributed import cleanup_ddp, distribute_loader, is_main_process, setup_ddp
from src.eval import eval_single_dataset
from src.heads import get_classification_head
from src.modeling import ImageClassifier, ImageEncoder
from src.utils import LabelSmoothing, cosine_lr


def finetune(rank, args):
    setup_ddp(rank, args.world_size, port=args.port)
    train_dataset = args.train_dataset
    ckpdir = os.path.join(args.save, train_dataset)

    image_encoder = ImageEncoder(args)
    head = get_classification_head(args, train_dataset.split("_")[-1])
    model = ImageClassifier(image_encoder, head)
    model.freeze_head()
    model = model.cuda()

    dataset = get_dataset(train_dataset, model.train_preprocess, location=args.data_location,
                          batch_size=args.batch_size, num_workers=args.num_workers)
    data_loader = get_dataloader(dataset, is_train=True, args=args, image_encoder=None)
    num_batches = len(dataset.train_loader)
    ddp_loader = distribute_loader(data_loader)
    ddp_model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank], find_unused_parameters=True, output_device=rank)

    if args.ls > 0:
        loss_fn = LabelSmoothing(args.ls)
    else:
        loss_fn = torch.nn.CrossEntropyLoss()

    params = [p for p in ddp_model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=args.lr, weight_decay=args.wd)
    scheduler = cosine_lr(optimizer, args.lr, args.warmup_length, args.epochs * num_batches // args.num_grad_accumulation)

    scaler = GradScaler()
    for epoch in range(args.epochs):
        ddp_model.train()
        ddp_loader.sampler.set_epoch(epoch)
        for i, batch in enumerate(ddp_loader):
            t0 = time.time()
            step = i // args.num_grad_accumulation + epoch * num_batches // args.num_grad_accumulation
            batch = maybe_dictionarize(batch)
            inputs = batch["images"].cuda()
            labels = batch["labels"].cuda()

            with torch.autocast(device_type="cuda", dtype=torch.float16):
                logits = ddp_model(inputs)
                loss = loss_fn(logits, labels)

            scaler.scale(loss).backward()

            if (i + 1) % args.num_grad_accumulation == 0:
                scheduler(step)
                torch.nn.utils.clip_grad_norm_(params, 1.0)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()

            if step % 50 == 0 and (i + 1) % args.num_grad_accumulation == 0 and is_main_process():
                print(epoch, i, loss.item(), time.time() - t0)

        eval_single_dataset(ddp_model.module.image_encoder, train_dataset, args)

    if args.save is not None and is_main_process():
        os.makedirs(ckpdir, exist_ok=True)
        ddp_model.module.image_encoder.save(os.path.join(ckpdir, "finetuned.pt"))
    cleanup_ddp()


if __name__ == "__main__":
    for name, n_epochs in {"Cars": 35, "DTD": 76, "EuroSAT": 12, "MNIST": 5}.items():
        args = parse_arguments()
        args.lr = 1e-5
        args.epochs = n_epochs
        args.train_dataset = name + "Val"
        args.batch_size = 64 if args.model == "ViT-L-14" else 128
        args.num_workers = 4
        args.num_grad_accumulation = 2 if args.model == "ViT-L-14" else 1
        args.save = f"checkpoints/{args.model}"
        torch.multiprocessing.spawn(finetune, args=(args,), nprocs=args.world_size)
