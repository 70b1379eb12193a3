"""
Shape: one long main() for multi-head vision-encoder pretraining: a backbone plus one PartialFC margin head per dataset, AdamW over a list of param groups (backbone, then one group per head with its own lr and weight decay), a custom PolynomialLRWarmup(optimizer, warmup_iters, total_steps, power) sized from args.total_steps, a DDP-wrapped and torch.compile'd backbone, a list of DALI iterators prefetched one batch ahead, and a `while not end_of_batch` loop counting global_step with gradient accumulation over args.backward_passes_per_step (no_sync on accumulation steps, clip + optimizer.step on the sync step), a batch_end_callback helper and periodic save_checkpoint.
Bug: sched.step() sits after the if/else on accumulation, so it runs on every micro-step while optimizer.step() runs only once per backward_passes_per_step micro-steps; the polynomial warmup/decay advances several times per real update.
Thread: https://github.com/EvolvingLMMs-Lab/OneVision-Encoder/pull/82
"""
import torch
from torch.nn.utils import clip_grad_norm_

from training.checkpoint_utils import load_checkpoint, save_checkpoint
from training.fused_partial_fc_v2_multi_res import CombinedMarginLoss, PartialFC_V2
from training.lr_scheduler import PolynomialLRWarmup
from training.utils import BatchEndCallBack, build_backbone, build_dali_iter, init_dist, parse_args


def main():
    args = parse_args()
    rank, local_rank, world_size = init_dist()

    backbone = build_backbone(args).cuda().train()
    groups = [{"params": [p for p in backbone.parameters() if p.requires_grad]}]

    heads = []
    head_by_name = {}
    for head_id in range(args.num_heads):
        margin = CombinedMarginLoss(64, 1, 0, args.list_margins[head_id], args.list_filters[head_id])
        pfc = PartialFC_V2(margin, args.embedding_size, args.list_datasets[head_id].num_classes,
                           args.list_sample_rates[head_id], fp16=False)
        pfc.train().cuda()
        heads.append(pfc)
        head_by_name[args.list_head_names[head_id]] = pfc
        groups.append({"params": pfc.parameters(),
                       "lr": args.lr * args.list_lr_pfc_weights[head_id],
                       "weight_decay": args.weight_decay_pfc})

    optimizer = torch.optim.AdamW(groups, lr=args.lr, weight_decay=args.weight_decay)
    sched = PolynomialLRWarmup(optimizer, int(args.total_steps * args.warmup_ratio), args.total_steps, 2)

    state = load_checkpoint(args.output, None, backbone, head_by_name, sched, None, args.list_head_names)
    global_step = state["global_step"] if state is not None else 0

    backbone_ddp = torch.nn.parallel.DistributedDataParallel(
        module=backbone, broadcast_buffers=False, device_ids=[local_rank],
        bucket_cap_mb=32, find_unused_parameters=True, static_graph=True)
    encoder = torch.compile(backbone_ddp)

    iters = [iter(build_dali_iter(args, head_id, rank)) for head_id in range(args.num_heads)]
    next_batches = [next(it) for it in iters]
    on_batch_end = BatchEndCallBack(frequent=args.frequent, list_head_names=args.list_head_names,
                                    output=args.output, total_steps=args.total_steps)

    num_samples = 0
    end_of_batch = False
    while not end_of_batch:
        batches = next_batches
        num_samples += sum(args.list_batch_sizes_adjusted) * world_size

        embeddings = []
        for head_id in range(args.num_heads):
            with torch.amp.autocast(dtype=torch.bfloat16, device_type="cuda"):
                out = encoder(batches[head_id]["pixel_values"])
            emb = out.pooler_output if hasattr(out, "pooler_output") else out["head_output"]
            embeddings.append(emb.float())

        losses = []
        loss_values = []
        for head_id, pfc in enumerate(heads):
            cfg = args.list_datasets[head_id]
            labels = batches[head_id]["labels"].long().cuda()
            labels = labels[:, cfg.label_select: cfg.label_select + cfg.random_diff]
            head_loss = pfc(embeddings[head_id], labels, cfg.random_diff) * args.list_loss_weights[head_id]
            losses.append(head_loss)
            loss_values.append(head_loss.item())

        accumulating = global_step % args.backward_passes_per_step != 0
        scaled = sum(losses) / args.backward_passes_per_step

        if accumulating:
            with encoder.no_sync():
                scaled.backward()
        else:
            scaled.backward()
            clip_grad_norm_(encoder.parameters(), max_norm=5, norm_type=2)
            for pfc in heads:
                clip_grad_norm_(pfc.parameters(), max_norm=5, norm_type=2)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        sched.step()

        on_batch_end(global_step=global_step, lr_scheduler=sched, list_loss_float=loss_values,
                     batch_size=args.batch_size, num_samples=num_samples)
        global_step += 1

        for head_id in range(args.num_heads):
            next_batches[head_id] = next(iters[head_id])

        if global_step % args.ckpt_interval == 0 or global_step > args.total_steps:
            save_checkpoint(args.output, backbone, pfc_modules=head_by_name, lr_scheduler=sched,
                            amp=None, global_step=global_step, list_head_names=args.list_head_names,
                            keep_num=20)
        if global_step > args.total_steps:
            end_of_batch = True


if __name__ == "__main__":
    main()
