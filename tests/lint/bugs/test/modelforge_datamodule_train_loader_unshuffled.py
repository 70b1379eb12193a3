"""
Shape: Lightning data module `MolDataModule(pl.LightningDataModule)` for a neural-potential library: prepare_data() creates the molecular dataset through a DatasetFactory and computes per-atom energy statistics over an unshuffled loader; setup(stage) restores split indices from a saved file or falls back to a splitting strategy object; train/val/test_dataloader each build a DataLoader with a custom collate function (collate_conformers) and four workers; a short driver fits a Lightning potential model with pl.Trainer.
Bug: train_dataloader passes no shuffle argument, so the DataLoader keeps its default shuffle=False and the training conformers are visited in the same stored order every epoch.
Thread: https://github.com/choderalab/modelforge/pull/129
"""
import json
from typing import Dict, Optional

import pytorch_lightning as pl
import torch
from loguru import logger
from torch.utils.data import DataLoader, Subset

from modelforge.dataset.dataset import DatasetFactory, collate_conformers
from modelforge.dataset.utils import RandomRecordSplittingStrategy, SplittingStrategy
from modelforge.potential import NeuralNetworkPotentialFactory


class MolDataModule(pl.LightningDataModule):
    def __init__(self, data, split: SplittingStrategy = RandomRecordSplittingStrategy(),
                 batch_size: int = 64, split_file: Optional[str] = None):
        super().__init__()
        self.data = data
        self.split = split
        self.batch_size = batch_size
        self.split_file = split_file
        self.split_idxs: Optional[Dict[str, list]] = None
        self.dataset = None
        if split_file:
            with open(split_file) as fh:
                self.split_idxs = json.load(fh)
            logger.debug(f"Loaded split indices from {split_file}")

    def prepare_data(self) -> None:
        self.dataset = DatasetFactory().create_dataset(self.data)
        energy_sum = torch.tensor(0.0)
        atom_count = 0
        for batch in DataLoader(self.dataset, batch_size=self.batch_size, collate_fn=collate_conformers):
            energy_sum = energy_sum + batch.metadata.E.sum()
            atom_count += batch.nnp_input.atomic_numbers.size(0)
        self.mean_per_atom = energy_sum / max(atom_count, 1)

    def setup(self, stage: str) -> None:
        if self.split_idxs:
            self.train_dataset = Subset(self.dataset, self.split_idxs["train_idx"])
            self.val_dataset = Subset(self.dataset, self.split_idxs["val_idx"])
            self.test_dataset = Subset(self.dataset, self.split_idxs["test_idx"])
        else:
            self.train_dataset, self.val_dataset, self.test_dataset = self.split.split(self.dataset)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(
            self.train_dataset,
            batch_size=self.batch_size,
            collate_fn=collate_conformers,
            num_workers=4,
        )

    def val_dataloader(self) -> DataLoader:
        return DataLoader(
            self.val_dataset,
            batch_size=self.batch_size,
            collate_fn=collate_conformers,
            num_workers=4,
        )

    def test_dataloader(self) -> DataLoader:
        return DataLoader(
            self.test_dataset,
            batch_size=self.batch_size,
            collate_fn=collate_conformers,
            num_workers=4,
        )


def fit_potential(data, model_name: str = "SchNet", max_epochs: int = 100):
    datamodule = MolDataModule(data, batch_size=128)
    potential = NeuralNetworkPotentialFactory.create_nnp("training", model_name)
    trainer = pl.Trainer(max_epochs=max_epochs, accelerator="auto", num_nodes=1)
    trainer.fit(potential, datamodule)
    return potential
