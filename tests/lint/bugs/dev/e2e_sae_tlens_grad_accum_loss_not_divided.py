"""
Shape: pydantic Config models plus train(config, model, device) that builds Adam, derives accum_n from effective_batch_size // batch_size, an optional warmup LambdaLR, and a pile DataLoader; nested epoch/step loops with a modulo check for the optimizer step; main() builds a HookedTransformer.
Bug: loss = model(tok, return_type="loss") is backpropagated every step and the optimizer steps every accum_n micro-batches, but the loss (a mean) is never divided by accum_n.
Thread: https://github.com/ApolloResearch/e2e_sae/pull/70
"""
from pathlib import Path

import fire
import torch
from pydantic import BaseModel, ConfigDict, NonNegativeInt, PositiveFloat, PositiveInt
from tqdm import tqdm
import transformer_lens
from transformer_lens import evals

import e2e_sae.utils as e2e_utils


class TrainSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    n_epochs: PositiveInt
    batch_size: PositiveInt
    effective_batch_size: PositiveInt | None = None  # None: no accumulation
    lr: PositiveFloat
    warmup_samples: NonNegativeInt = 0  # samples of linear warmup
    save_dir: Path | None = None


class RunSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)
    seed: int = 0
    name: str
    tlens_config: dict
    train: TrainSettings


def train(config: RunSettings, model: transformer_lens.HookedTransformer, device: torch.device) -> None:
    model.train()
    adam = torch.optim.Adam(params=model.parameters(), lr=config.train.lr)

    bsz = config.train.batch_size
    eff_bs = config.train.effective_batch_size or bsz
    accum_n = eff_bs // bsz

    warm_sched = None
    if config.train.warmup_samples:
        warm_n = config.train.warmup_samples // eff_bs
        warm_sched = torch.optim.lr_scheduler.LambdaLR(adam, lr_lambda=lambda s: min(1.0, (s + 1) / warm_n))

    pile_loader = evals.make_pile_data_loader(model.tokenizer, batch_size=bsz)

    n_seen = 0
    n_updates = 0
    for epoch in tqdm(range(1, config.train.n_epochs + 1), desc="Epochs"):
        for i, item in enumerate(tqdm(pile_loader, desc="Steps")):
            tok = item["tokens"].to(device=device)
            loss = model(tok, return_type="loss")

            loss.backward()

            if (i + 1) % accum_n == 0:
                adam.step()
                adam.zero_grad()
                n_updates += 1
                if warm_sched is not None:
                    assert warm_sched is not None
                    warm_sched.step()

            n_seen += tok.shape[0]
        if config.train.save_dir and epoch == config.train.n_epochs:
            e2e_utils.save_module(config_dict=config.model_dump(mode="json"), save_dir=config.train.save_dir,
                        module=model, model_filename=f"epoch_{epoch}.pt")


def main(cfg_path: str) -> None:
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    config = e2e_utils.load_config(cfg_path, config_model=RunSettings)
    e2e_utils.set_seed(config.seed)
    model = transformer_lens.HookedTransformer(transformer_lens.HookedTransformerConfig(**config.tlens_config))
    model.to(device)
    train(config, model, device)


if __name__ == "__main__":
    fire.Fire(main)
