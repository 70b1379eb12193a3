"""Supervised fine-tuning of a unified vision-reasoning model in the shape of a training Dataset
class: each sample is assembled as [BOS, user prompt, problem-image tokens, assistant prefix, BSS]
with every label -100, then [summary, answer-image tokens, ESS, EOS] with real labels, and finally
input_ids[:max_length] and labels[:max_length] are cut independently. When the masked prefix alone
reaches max_length (a long prompt with many problem-image tokens), every supervised label is cut
away and the sample's labels are all -100; with one sample per device, cross-entropy over zero
targets returns NaN, every gradient of that step is zero, and the optimizer still steps (weight
decay, Adam moments left from earlier samples) while the run keeps going.

Thread: https://github.com/bytedance/UniVR/issues/13
"""
import torch
import torch.nn.functional as F
from torch import nn

PAD, BOS, EOS, BSS, ESS, ASSISTANT = 0, 1, 2, 3, 4, 5
TEXT0, IMAGE0 = 6, 30  # text tokens 6..29, image tokens 30..61
VOCAB = 62


class VRTrainDataset:
    def __init__(self, n, seed, max_length=40):
        self.max_length = max_length
        g = torch.Generator().manual_seed(seed)
        self.samples = []
        for _ in range(n):
            prompt = torch.randint(TEXT0, IMAGE0, (int(torch.randint(4, 10, (1,), generator=g)),), generator=g)
            n_frames = 1 + int(torch.rand(1, generator=g) < 0.1) * 4  # a few problems carry 5 image frames
            image = torch.randint(IMAGE0, VOCAB, (n_frames * 8,), generator=g)
            self.samples.append((prompt.tolist(), image.tolist()))

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, idx):
        prompt, image = self.samples[idx]
        summary = sorted(prompt)[:4]                        # target text derived from the prompt
        answer_image = [IMAGE0 + (t - IMAGE0 + 5) % 32 for t in image[:8]]  # one answer frame
        prefix = [BOS] + prompt + image + [ASSISTANT, BSS]
        target = summary + answer_image + [ESS, EOS]
        input_ids = prefix + target
        labels = [-100] * len(prefix) + target
        input_ids = input_ids[:self.max_length]
        labels = labels[:self.max_length]
        return torch.tensor(input_ids), torch.tensor(labels)


class TinyUnifiedModel(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.lm_head = nn.Linear(dim, VOCAB)

    def forward(self, input_ids, labels=None):
        logits = self.lm_head(self.rnn(self.embed(input_ids))[0])
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1), ignore_index=-100)
        return loss, logits


def train(model, optimizer, dataset, epochs=1):
    g = torch.Generator().manual_seed(1)
    step = nan_steps = 0
    for epoch in range(epochs):
        model.train()
        for idx in torch.randperm(len(dataset), generator=g).tolist():
            input_ids, labels = dataset[idx]
            loss, _ = model(input_ids.unsqueeze(0), labels.unsqueeze(0))  # per-device batch size 1
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            step += 1
            nan_steps += int(torch.isnan(loss))
            if step % 20 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
    return nan_steps


def main():
    torch.manual_seed(0)
    dataset = VRTrainDataset(300, seed=0)
    model = TinyUnifiedModel()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)
    nan_steps = train(model, optimizer, dataset)
    print(f"steps with a NaN loss: {nan_steps} of {len(dataset)}")


if __name__ == "__main__":
    main()
