"""Multi-turn SFT with sample packing, in the shape of an SFTDataset / SFTTrainer pair: the dataset
records, for every conversation, the token range of each assistant turn (start, inclusive end);
packing_collate_fn concatenates several conversations into one row and shifts each conversation's
ranges into packed coordinates; SFTTrainer.fit() keeps only the labels inside those ranges (the rest
-100) and calls a GPT-style shifted cross-entropy loss. The shift added to a conversation's ranges
is the end index of the last response of the previous conversation, not the summed length of the
conversations before it, so every packed conversation is offset one token further to the left: the
loss scores end-of-user-turn and assistant-header tokens, and drops the end of the answers.

Thread: https://github.com/OpenRLHF/OpenRLHF/pull/781
"""
import torch
import torch.nn.functional as F
from torch import nn

LETTERS = "abcdefgh"
BOS, EOT, USER, ASSISTANT, PAD = 1, 2, 3, 4, 0
VOCAB = 5 + len(LETTERS)


def encode(word):
    return [5 + LETTERS.index(c) for c in word]


class SFTDataset:
    """Each conversation: two user turns, each answered by the reversed word."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.items = []
        for _ in range(n):
            ids, ranges = [BOS], []
            for _turn in range(2):
                k = int(torch.randint(2, 5, (1,), generator=g))
                word = "".join(LETTERS[int(i)] for i in torch.randint(0, len(LETTERS), (k,), generator=g))
                ids += [USER] + encode(word) + [EOT, ASSISTANT]
                start = len(ids)
                ids += encode(word[::-1]) + [EOT]
                ranges.append([start, len(ids) - 1])  # end index of the response, inclusive
            self.items.append((torch.tensor(ids), ranges))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        ids, ranges = self.items[idx]
        return ids, {"input_length": len(ids), "response_ranges": [list(r) for r in ranges]}

    def packing_collate_fn(self, item_list):
        packed, infos = [], {"input_length": [], "response_ranges": []}
        for ids, info in item_list:
            packed.append(ids)
            infos["input_length"].append(info["input_length"])
            if len(infos["response_ranges"]) >= 1:
                for r in info["response_ranges"]:
                    shift = infos["response_ranges"][-1][-1][1]  # end of the previous item's last response
                    r[0] += shift
                    r[1] += shift
            infos["response_ranges"].append(info["response_ranges"])
        return torch.cat(packed).unsqueeze(0), infos


class GPTLMLoss(nn.Module):
    IGNORE_INDEX = -100

    def forward(self, logits, labels):
        shift_logits = logits[:, :-1].reshape(-1, logits.size(-1))
        return F.cross_entropy(shift_logits, labels[:, 1:].reshape(-1), ignore_index=self.IGNORE_INDEX)


class TinyCausalLM(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, VOCAB)

    def forward(self, input_ids):
        return self.head(self.rnn(self.embed(input_ids))[0])


class SFTTrainer:
    def __init__(self, model, optimizer, dataset, pack_size=8, max_epochs=3):
        self.model, self.optimizer, self.dataset = model, optimizer, dataset
        self.loss_fn = GPTLMLoss()
        self.pack_size, self.max_epochs = pack_size, max_epochs

    def fit(self):
        g = torch.Generator().manual_seed(1)
        step = 0
        for epoch in range(self.max_epochs):
            self.model.train()
            order = torch.randperm(len(self.dataset), generator=g).tolist()
            for b in range(0, len(order), self.pack_size):
                input_ids, infos = self.dataset.packing_collate_fn([self.dataset[i] for i in order[b:b + self.pack_size]])
                logits = self.model(input_ids)
                labels = torch.full_like(input_ids, self.loss_fn.IGNORE_INDEX)
                for response_ranges in infos["response_ranges"]:
                    for start, end in response_ranges:
                        labels[0, start:end + 1] = input_ids[0, start:end + 1]
                loss = self.loss_fn(logits, labels)
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()
                step += 1
                if step % 20 == 0:
                    print(f"epoch {epoch} step {step} gpt_loss {loss.item():.4f}")


def answer_accuracy(model, dataset):
    model.eval()
    hit = total = 0
    with torch.no_grad():
        for ids, info in (dataset[i] for i in range(len(dataset))):
            pred = model(ids.unsqueeze(0))[0].argmax(-1)
            for start, end in info["response_ranges"]:
                hit += int((pred[start - 1:end] == ids[start:end + 1]).sum())
                total += end + 1 - start
    return hit / total


def main():
    torch.manual_seed(0)
    train, held_out = SFTDataset(640, seed=0), SFTDataset(100, seed=1)
    model = TinyCausalLM()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    SFTTrainer(model, optimizer, train).fit()
    print(f"held-out answer token accuracy: {answer_accuracy(model, held_out):.3f}")


if __name__ == "__main__":
    main()
