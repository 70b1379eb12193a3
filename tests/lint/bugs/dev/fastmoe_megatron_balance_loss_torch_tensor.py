"""
Shape: a MoE plugin for Megatron patches the user's `forward_step_func`: the wrapper runs the
original step, collects each transformer layer's gate balance loss via `gate.get_loss`, averages
them, scales by a weight, all-reduces a detached copy for logging, and adds the balance loss to the
language-model loss that Megatron back-propagates.
Bug: the per-layer gate losses are combined with `torch.tensor(loss_list, ...)`, which copies their
values into a fresh leaf tensor without grad history, so the balance term added to the loss carries
no gradient back to the gates.
Thread: https://github.com/laekov/fastmoe/issues/49
"""
import torch


def default_comm():
    return torch.distributed.group.WORLD


def wrap_forward_step(forward_step_func):
    from megatron import get_args
    from megatron import mpu

    if not get_args().balance_strategy:
        return forward_step_func  # nothing to patch

    def step_with_balance(data_iterator, model, input_tensor):
        args = get_args()
        output = forward_step_func(data_iterator, model, input_tensor=input_tensor)

        if not mpu.is_pipeline_last_stage() or args.balance_strategy == "naive":
            return output
        key = args.balance_strategy + "_loss"

        core = model.module if hasattr(model, "module") else model

        per_layer = [
            blk.mlp.gate.get_loss(clear=False)
            for blk in core.language_model.transformer.layers
        ]
        lm_loss, stats = output
        bal_loss = (
            torch.tensor(per_layer, device=per_layer[0].device).mean()
            * float(args.balance_loss_weight)
        ).float()

        group = default_comm()
        world = torch.distributed.get_world_size(group=group)
        reported = bal_loss.clone().detach()
        torch.distributed.all_reduce(reported, group=group)
        reported /= world

        lm_loss += bal_loss
        stats[key] = reported
        return lm_loss, stats

    return step_with_balance


def pretrain_with_moe(train_valid_test_provider, model_provider, forward_step):
    from megatron.training import pretrain

    pretrain(
        train_valid_test_provider,
        model_provider,
        wrap_forward_step(forward_step),
        args_defaults={"tokenizer_type": "GPT2BPETokenizer"},
    )
