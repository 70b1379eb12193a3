"""Reward-model training for RLHF with a rank-list loss: a RewardModel (encoder plus a linear
scoring head) scores each text of a ranked list one forward at a time, compute_rank_list_loss()
pushes every better-ranked text above every worse one, and train() evaluates every valid_steps
with evaluate_model(), the fraction of dev lists whose scores come out in the labelled order. In
evaluate_model() the list that collects the scored lists, batch_rank_rewards, is re-created at
the top of the loop over dev batches, so only the last dev batch (10 lists here) survives to the
accuracy computation. The reported accuracy is always a multiple of 0.1 and jumps around between
evaluations, whatever the model's accuracy on the whole dev set is.

Thread: https://github.com/HarderThenHarder/transformers_tasks/issues/12
"""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, SEQ_LEN, RANK_TEXTS = 20, 12, 3


class RewardModel(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.encoder = nn.GRU(dim, dim, batch_first=True)
        self.reward_layer = nn.Linear(dim, 1)

    def forward(self, input_ids, attention_mask):
        h = self.encoder(self.embed(input_ids))[0]
        pooled = (h * attention_mask[..., None]).sum(1) / attention_mask.sum(1, keepdim=True)
        return self.reward_layer(pooled)


def compute_rank_list_loss(rank_rewards_list):
    loss, add_count = 0.0, 0
    for rank_rewards in rank_rewards_list:
        for i in range(len(rank_rewards) - 1):
            for j in range(i + 1, len(rank_rewards)):
                loss = loss - F.logsigmoid(rank_rewards[i] - rank_rewards[j])
                add_count += 1
    return (loss / add_count).squeeze()


def make_ranked_lists(n, seed):
    g = torch.Generator().manual_seed(seed)
    data = []
    for _ in range(n):
        texts = torch.randint(2, VOCAB, (RANK_TEXTS, SEQ_LEN), generator=g)
        quality = (texts < 8).float().sum(1) + 0.5 * torch.rand(RANK_TEXTS, generator=g)
        order = quality.argsort(descending=True)
        data.append({"input_ids": texts[order], "attention_mask": torch.ones(RANK_TEXTS, SEQ_LEN)})
    return data


def batches(dataset, batch_size):
    for i in range(0, len(dataset), batch_size):
        chunk = dataset[i:i + batch_size]
        yield {k: torch.stack([d[k] for d in chunk]) for k in chunk[0]}


def evaluate_model(model, dev_set, batch_size):
    model.eval()
    with torch.no_grad():
        for batch in batches(dev_set, batch_size):
            batch_rank_rewards = []
            for b in range(len(batch["input_ids"])):
                rank_rewards = []
                for t in range(RANK_TEXTS):
                    reward = model(batch["input_ids"][b][t].unsqueeze(0), batch["attention_mask"][b][t].unsqueeze(0))
                    rank_rewards.append(reward[0])
                batch_rank_rewards.append(rank_rewards)
    model.train()
    total_ranklist, right_ranklist = 0, 0
    for rank_rewards in batch_rank_rewards:
        rank_rewards = [float(r) for r in rank_rewards]
        total_ranklist += 1
        right_ranklist += int(sorted(rank_rewards, reverse=True) == rank_rewards)
    return right_ranklist / total_ranklist


def train(num_train_epochs=2, batch_size=16, valid_steps=20, logging_steps=10):
    torch.manual_seed(0)
    model = RewardModel()
    train_set, dev_set = make_ranked_lists(640, seed=0), make_ranked_lists(250, seed=1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    max_steps = num_train_epochs * len(train_set) // batch_size
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1 - s / max_steps)
    global_step, best_acc, loss_list = 0, 0.0, []
    for epoch in range(1, num_train_epochs + 1):
        for batch in batches(train_set, batch_size):
            batch_rank_rewards = []
            for b in range(len(batch["input_ids"])):
                rank_rewards = []
                for t in range(RANK_TEXTS):
                    reward = model(batch["input_ids"][b][t].unsqueeze(0), batch["attention_mask"][b][t].unsqueeze(0))
                    rank_rewards.append(reward[0])
                batch_rank_rewards.append(rank_rewards)
            loss = compute_rank_list_loss(batch_rank_rewards)
            loss.backward()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            loss_list.append(loss.item())
            global_step += 1
            if global_step % logging_steps == 0:
                print(f"global step {global_step}, epoch: {epoch}, loss: {sum(loss_list) / len(loss_list):.5f}")
            if global_step % valid_steps == 0:
                acc = evaluate_model(model, dev_set, batch_size)
                print(f"Evaluation acc: {acc:.5f}")
                if acc > best_acc:
                    print(f"best acc updated: {best_acc:.5f} --> {acc:.5f}")
                    best_acc = acc


if __name__ == "__main__":
    train()
