"""A speedrun-style train_gpt2.py: a small GPT with a tied lm_head, a DistributedDataLoader that
hands out (x, y) with next_batch(), a get_lr() with linear warmup and warmdown, a fixed-size
validation pass every few steps, and a training section that loops over micro steps, divides each
micro-batch loss by grad_accumulation_steps, adds loss.detach() to train_loss and calls backward,
then steps AdamW and prints the loss. After the micro-step loop the script divides train_loss by
grad_accumulation_steps a second time, so the printed training loss is the true mean loss divided
by the accumulation count (8 here): it reads far below the validation loss on the same data and
the logged curve is wrong by that factor, while the optimization itself is untouched. The job is
simulated as world size 1 (one process, no process group).

Thread: https://github.com/BottleCapAI/NoCap-Test/pull/2
"""
import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = nn.MultiheadAttention(n_embd, n_head, batch_first=True)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x, mask):
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size=64, block_size=32, n_layer=2, n_head=4, n_embd=64):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None, return_logits=True):
        t = idx.size(1)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        x = self.wte(idx) + self.wpe(torch.arange(t))
        for block in self.h:
            x = block(x, mask)
        logits = self.lm_head(self.ln_f(x))
        loss = None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return (logits if return_logits else None), loss

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        return torch.optim.AdamW(self.parameters(), lr=learning_rate, weight_decay=weight_decay, betas=betas)


class DistributedDataLoader:
    """Reads a token stream in B*T chunks, each rank at its own offset (rank 0 of 1 here). The
    stream is a fixed random Markov chain so the loss has a clear floor."""

    def __init__(self, seed, B, T, process_rank, num_processes, vocab_size=64, n_tokens=120_000):
        g = torch.Generator().manual_seed(seed)
        table = torch.randint(0, vocab_size, (vocab_size, 3), generator=torch.Generator().manual_seed(11))
        choice = torch.randint(0, 3, (n_tokens,), generator=g)
        table, choice = table.tolist(), choice.tolist()
        toks = [0]
        for i in range(1, n_tokens):
            toks.append(table[toks[-1]][choice[i]])
        self.tokens = torch.tensor(toks)
        self.B, self.T = B, T
        self.process_rank, self.num_processes = process_rank, num_processes
        self.reset()

    def reset(self):
        self.current_position = self.process_rank * self.B * self.T

    def next_batch(self):
        B, T = self.B, self.T
        buf = self.tokens[self.current_position:self.current_position + B * T + 1]
        x, y = buf[:-1].view(B, T), buf[1:].view(B, T)
        self.current_position += B * T * self.num_processes
        if self.current_position + B * T * self.num_processes + 1 > len(self.tokens):
            self.reset()
        return x, y


def print0(*args):
    print(*args)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--sequence_length", type=int, default=32)
    parser.add_argument("--grad_accumulation_steps", type=int, default=8)
    parser.add_argument("--num_iterations", type=int, default=120)
    parser.add_argument("--learning_rate", type=float, default=3e-3)
    parser.add_argument("--warmup_iters", type=int, default=10)
    parser.add_argument("--warmdown_iters", type=int, default=40)
    parser.add_argument("--weight_decay", type=float, default=0.0)
    parser.add_argument("--val_loss_every", type=int, default=20)
    parser.add_argument("--val_steps", type=int, default=4)
    args = parser.parse_args([])

    torch.manual_seed(0)
    B, T = args.batch_size, args.sequence_length
    ddp_rank, ddp_world_size = 0, 1
    args.grad_accumulation_steps //= ddp_world_size
    train_loader = DistributedDataLoader(1, B, T, ddp_rank, ddp_world_size)
    val_loader = DistributedDataLoader(2, B, T, ddp_rank, ddp_world_size, n_tokens=20_000)
    x, y = train_loader.next_batch()

    model = GPT(block_size=T).train()
    raw_model = model
    optimizer = raw_model.configure_optimizers(args.weight_decay, args.learning_rate, (0.9, 0.95))

    def get_lr(it):
        if it < args.warmup_iters:
            return args.learning_rate * (it + 1) / args.warmup_iters
        elif it < args.num_iterations - args.warmdown_iters:
            return args.learning_rate
        return args.learning_rate * (args.num_iterations - it) / args.warmdown_iters

    print0(f"tokens per iteration: {B * T * ddp_world_size * args.grad_accumulation_steps:,}")
    for step in range(args.num_iterations + 1):
        last_step = step == args.num_iterations
        if args.val_loss_every > 0 and (step % args.val_loss_every == 0 or last_step):
            model.eval()
            val_loader.reset()
            with torch.no_grad():
                val_loss = 0.0
                for _ in range(args.val_steps):
                    x_val, y_val = val_loader.next_batch()
                    _, loss = model(x_val, y_val, return_logits=False)
                    val_loss += loss
                val_loss /= args.val_steps
            print0(f"step:{step}/{args.num_iterations} | val loss {val_loss:.6f}")
        if last_step:
            break

        model.train()
        train_loss = torch.zeros(1)
        for micro_step in range(args.grad_accumulation_steps):
            _, loss = model(x, y, return_logits=False)
            loss = loss / args.grad_accumulation_steps
            train_loss += loss.detach()
            x, y = train_loader.next_batch()
            loss.backward()
        train_loss /= args.grad_accumulation_steps

        lr = get_lr(step)
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

        lossf = train_loss.item()
        if step % 10 == 0:
            print0(f"step:{step}/{args.num_iterations} | loss {lossf:.6f} | lr {lr:.2e}")


if __name__ == "__main__":
    main()
