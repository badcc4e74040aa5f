"""Watch conditioning while a model trains (issue 20): κ(X), κ(X_l), μ(LA) and attention entropy, logged
to whatever the training already logs to.

- :class:`Monitor` ``(model, layers=None, metrics=None, lam=None, max_samples=16)``: ``.measure(batch)``
  for a custom loop, a dict of floats.
- :class:`ConditioningCallback` (a ``transformers.TrainerCallback``): measures through a Monitor every
  ``every_n_steps`` optimizer steps and at the last step, and logs through the Trainer's own ``log``.
- :class:`condcli.monitor.lightning.ConditioningLightningCallback`: the same for Lightning
  (``pip install condcli[lightning]``).

**The values.** Each is the median over the probe samples of the value ``condcli spectrum`` reports per
sample for the same weights and inputs: the same analysed module (a transformers model's base model),
adapter, capture, padding cut (each text sample cut to its attention mask's real tokens; the probe batch
must be padded on the right) and float64 math. The model runs in eval mode, under ``no_grad``, in its
parameters' dtype (no autocast), with eager attention for the one measuring forward.

**The keys** (stable; ``condcli track`` compares with them):

- ``condcli/kappa_x``: κ(X) (metric ``kappa``); ``condcli/kappa_x_conditioned``: κ(X + λI_k), logged when
  ``lam`` is given, or with the model's own λ where it adds its own shift at X, or when the metric
  ``kappa_conditioned`` is asked for (λ = 10 then); ``condcli/kappa_x_corrected``: κ(X + C).
- ``condcli/layer_<i>/<metric>`` for each chosen layer i (condcli's layer index, 0 = the first block, whose
  X_l is ``hidden_states[i]`` of an HF encoder; zero-padded to the digits of the model's layer count, so
  ``layer_02`` … ``layer_11`` of a 12-layer model sort in layer order) and each per-layer metric of the
  registry (:data:`condcli.reports.metrics.FORWARD`: ``kappa`` = κ(X_l), ``kappa_attn_input``, ``mu_la``,
  ``mu_a``, ``kappa_probs``, ``kappa_mixing``, ``attention_entropy``, ``stable_rank``; and the weights'
  ``kappa_wq``, ``kappa_wk``, ``kappa_wv``, the full projections, a model constant that moves as it
  trains). Metrics of P are absent for a layer whose P the family cannot observe.
- **Floors** (docs/math.md#spectra): where a median is only a floor σ_1/tol (its X below the capture
  dtype's resolution), the floor value is logged under the key and ``<key>/floor`` = 1.0 beside it. Where
  the median is a measurement there is no ``/floor`` key: a dashboard shows a floor series only where there
  is a floor. The metrics that can be floors: ``condcli/kappa_x``, and per layer ``kappa``,
  ``kappa_attn_input``, ``mu_la``, ``mu_a``, ``kappa_probs``, ``kappa_mixing``. ``inf`` (singular) is
  logged as ``float('inf')``.
- Default ``metrics``: ``kappa``, ``mu_la``, ``attention_entropy`` (κ(X), κ(X_l), μ(LA), H(P)).

**The callback's probe batch** (to reproduce its numbers): the dataset is the Trainer's ``eval_dataset``
(the first one where it is a dict of datasets), else its ``train_dataset``; samples ``0 … max_samples-1``
of it in dataset order (an iterable dataset: its first ``max_samples`` items), with the columns the Trainer
removes removed (``remove_unused_columns``), collated by the Trainer's own ``data_collator`` in one batch,
once, at the start of training. At a logged step the values belong to the weights after that optimizer
step (``state.global_step``), the weights a checkpoint saved at that step holds. The callback saves the
batch it feeds as ``condcli_probe.safetensors`` in ``output_dir`` and in each checkpoint folder
(:mod:`condcli.monitor.trainer`); ``condcli track`` on those folders, given no ``text`` or ``images``, reads
it and reports the logged values at the checkpoints' steps.
"""

from __future__ import annotations

from typing import Any

from condcli.monitor.monitor import Monitor

__all__ = ["ConditioningCallback", "Monitor"]


def __getattr__(name: str) -> Any:
    if name == "ConditioningCallback":  # transformers' Trainer is imported only when asked for
        from condcli.monitor.trainer import ConditioningCallback

        return ConditioningCallback
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
