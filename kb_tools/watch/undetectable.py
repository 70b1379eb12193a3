"""The KB entries no check of `kb watch` names, each with the reason in one line.

Every entry id under kb/entries is either the `entry` of some check (kb_tools/watch/checks) or
listed here, never both (tests/test_watch_undetectable.py): whoever adds a check for an entry
removes it from this file.

- UNDETECTABLE: the cause cannot be seen from inside one short watched run (it lies in files,
  tokenizers, other processes, the intent behind a setting, or needs many epochs or a second run),
  or the entry is a practice rather than a fault.
- NO_CHECK_YET: the cause shows in what a watched run measures, but no check measures it yet.
"""
from __future__ import annotations

UNDETECTABLE = {
    # data and its pipeline: decided outside torch, or a fact about the meaning of the data
    "augmentation-target-desync": "whether a mask, box or keypoint went through the same transform as its image is a "
                                  "fact about the data's meaning; the tensors look ordinary",
    "stale-optimizer-state": "the state comes from another phase or is lost between two runs (a resume); whether "
                             "reusing it is wrong depends on what the phase change meant",
    "per-sample-input-normalization": "a per-sample normalisation is an ordinary operation; that the label depended on "
                                      "the erased level is a fact about the task",
    "stale-preprocessing-cache": "the cache is files on disk written by an earlier program; the run reads tensors",
    # distributed: needs several ranks compared, or the launcher's configuration
    "ddp-effective-batch-lr": "whether the lr was meant for one GPU or for the world size is a configuration intent",
    "nonfinite-any-rank-clip": "needs the per-rank skip and clip decisions compared across ranks; each rank is watched alone",
    # fine-tuning: tokenizer facts, export, inference
    "chat-template-mismatch": "the inference template is used in another program than the training run",
    "labels-dropped-before-model": "the model's own code path returns no loss (it fails in the model, with its own error)",
    "lora-not-merged": "the mistake is in the exported or served weights, after the run",
    "lora-target-modules": "which layers were meant to get adapters is the user's intent",
    "loss-on-prompt-tokens": "which positions are the prompt is a tokenizer and template fact; the loss sees ids",
    "tokenizer-padding-side": "the mistake shows in batched generation at inference, not in training",
    "weight-tying-broken": "whether two weights should be one tensor is a model design fact; untied weights are valid",
    # loss and optimisation choices that are legitimate in other settings
    "accumulation-counted-twice": "the extra division is a constant factor on the loss, indistinguishable from a "
                                  "deliberate loss weight",
    "competing-loss-terms": "how the terms should be weighted is a modelling choice; the run sees their sum",
    "clip-loss-not-gradient": "a clamp inside the loss is an ordinary op; only the final loss reaches the watcher",
    "sum-reduction-lr-scale": "reduction='sum' is a legitimate choice; its harm depends on the lr chosen with it",
    "label-smoothing-misread": "a loss floor read as a plateau is a reading of the curve, not a fault in the run",
    "over-regularization": "how strong dropout or weight decay should be is a judgement that needs the training curve",
    "discriminative-lr": "which parameters are pretrained and which are new is not visible in the optimizer",
    "adam-beta2-short-run": "depends on the planned length of the whole run, which a short watched run does not know",
    "fused-foreach-optimizer": "its failures are torch's own errors (reported as the run's error) or peak memory",
    # long-horizon effects: not within a short watched run
    "attention-logit-growth": "logits grow over thousands of steps, far beyond a short watched run",
    "overfitting-val-loss-rises": "shows over epochs of validation, far beyond a short watched run",
    "misleading-metric-improvement": "the metric is computed outside torch, and what it measures is the user's choice",
    "noisy-eval-estimate": "needs the spread of the metric over repeated evaluations, outside the run",
    # errors torch raises itself, named in the run's error
    "inplace-autograd-error": "torch raises its own RuntimeError naming the op; the watcher reports it as the run's error",
    # practices and triage procedures, not faults
    "compare-reference-implementation": "needs a reference implementation to compare with",
    "fixed-seed": "launch-to-launch noise needs several launches compared",
    "log-actual-lr": "advice on what to log, not a fault",
    "lr-range-test": "a procedure (an lr sweep), not a fault",
    "metric-stuck": "a triage of a metric computed outside torch",
    "overfit-one-batch": "a test to run on one fixed batch, not a fault",
    "prediction-dynamics": "a monitoring practice, not a fault",
    "train-metrics-under-augmentation": "a reading of training against validation metrics, not a fault",
    "update-to-weight-ratio": "a monitor; its findings are the entries lr-too-high and lr-too-low",
    "visualize-model-input": "a practice: looking at the batch that reaches the model",
    "weight-grad-histograms": "a monitoring practice, not a fault",
}

NO_CHECK_YET = {
    "class-imbalance": "the class frequencies of the cross-entropy targets, and predictions all of one class",
    "missing-warmup": "a loss spike in the first steps at a high constant lr; no criterion yet that spares healthy runs",
}


def listed() -> dict:
    """Every entry listed here, with its reason (NO_CHECK_YET reasons say what a check would measure)."""
    return {**UNDETECTABLE, **{k: f"no check yet; observable: {v}" for k, v in NO_CHECK_YET.items()}}
