"""
Shape: a prompt-optimization library: an HF wrapper class loads the target model with from_pretrained in the checkpoint's dtype (fp16 for some encoders) and exposes its input embedding layer and a compute_grad_from_embeds(loss_func, candidate_trigger_embeds) helper; a SoftPromptOptimizer(BaseOptimizer) class takes the gradient-descent optimizer class as a constructor argument (torch.optim.Adam by default) and, in optimize_trigger(templates, initial_trigger, targets), embeds the initial trigger tokens, builds the optimizer over that single tensor, writes the returned gradient into .grad by hand and steps it for num_steps, keeping the running best.
Bug: the optimized trigger tensor is taken from the embedding layer and so has the model's dtype; with an fp16 model Adam keeps its moments in fp16, the squared gradients and the default eps=1e-8 flush to zero, and the first step divides by zero, so the prompt becomes inf and every later loss is NaN.
Thread: https://github.com/matanbt/TROPT/pull/8
"""
import logging
from typing import Callable, Optional

import torch
from transformers import AutoModel, AutoTokenizer

from tropt.optimizer.base import BaseOptimizer
from tropt.optimizer.utils.running_best import RunningBest

log = logging.getLogger(__name__)


class EncoderWrapper:
    def __init__(self, name: str, device: str = "cuda"):
        self.tokenizer = AutoTokenizer.from_pretrained(name)
        self.net = AutoModel.from_pretrained(name, torch_dtype="auto").to(device).eval()
        self.device = device
        for p in self.net.parameters():
            p.requires_grad_(False)

    @property
    def embed_layer(self):
        return self.net.get_input_embeddings()

    def encode_trigger(self, text: str) -> torch.Tensor:
        return torch.tensor(self.tokenizer.encode(text, add_special_tokens=False))

    def compute_grad_from_embeds(self, loss_func, candidate_trigger_embeds, return_loss=True):
        emb = candidate_trigger_embeds.detach().clone().requires_grad_(True)
        pooled = self.net(inputs_embeds=emb).last_hidden_state.mean(dim=1)
        value = loss_func(pooled)
        value.sum().backward()
        return (emb.grad, value.detach()) if return_loss else emb.grad


class SoftPromptOptimizer(BaseOptimizer):
    def __init__(
        self,
        model: EncoderWrapper,
        loss,
        tracker=None,
        seed: Optional[int] = None,
        num_steps: int = 100,
        learning_rate: float = 1e-3,
        gd_optimizer: Callable[..., torch.optim.Optimizer] = torch.optim.Adam,
    ):
        super().__init__(model, loss=loss, tracker=tracker, seed=seed)
        self.num_steps = num_steps
        self.learning_rate = learning_rate
        self.opt_cls = gd_optimizer

    def optimize_trigger(self, templates, initial_trigger: str = "! ! ! ! !", targets=None):
        self.model_inputs = (templates, targets)
        ids = self.model.encode_trigger(initial_trigger).to(self.model.device)
        trigger = self.model.embed_layer(ids.unsqueeze(0)).detach().requires_grad_(True)

        opt = self.opt_cls([trigger], lr=self.learning_rate)
        best = RunningBest()
        for step in range(self.num_steps):
            opt.zero_grad()
            grad, cur = self.model.compute_grad_from_embeds(
                loss_func=self.loss_func, candidate_trigger_embeds=trigger, return_loss=True)
            trigger.grad = grad
            opt.step()
            cur = cur.item()
            best.update(loss=cur, trigger_emb=trigger.detach().squeeze(0))
            log.info("step %d loss %.4f lr %g", step, cur, opt.param_groups[0]["lr"])
        return best.to_result()


def run_encoder_attack(model_name: str, loss, target_vector: torch.Tensor):
    wrapper = EncoderWrapper(model_name)
    searcher = SoftPromptOptimizer(model=wrapper, loss=loss, num_steps=500, learning_rate=1e-3)
    return searcher.optimize_trigger(templates=["{{TRIGGER}}"], targets=target_vector)
