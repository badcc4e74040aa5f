"""Per-layer quantities (SPEC §3) over a stream of captured layers: κ(X_l), κ(A_l), κ(W), μ(LA), μ(A).

Attention groups (Swin/DaViT windows) are matrices of their own: a sample's κ(A_l) is its worst group's,
and μ is taken per group and head and then maximised, so μ(A) pairs each P with the A_l it came from.
"""

from __future__ import annotations

import torch

from condcli.adapters.base import HeadWeights, LayerSpec
from condcli.analysis.persample import summarize_samples, trim
from condcli.capture import LayerCapture
from condcli.errors import InternalError
from condcli.report import ForwardStats, HeadReport, WeightKappas
from condcli.spectra import ScalarStream, condition_number, mu_linear_attention, mu_softmax_attention


def weight_kappas(w: HeadWeights) -> WeightKappas:
    """κ of the full projections (SVD: square d×d weights are rarely within the Gram path's κ ≤ 300) and of
    every head's d×d_h slice (Gram path where it agrees with SVD, SVD elsewhere)."""
    full = condition_number(torch.stack([w.full("q"), w.full("k"), w.full("v")]), method="svd").tolist()
    heads = condition_number(torch.stack([w.wq, w.wk, w.wv])).tolist()  # (3, H)
    return WeightKappas(full[0], full[1], full[2], tuple(heads[0]), tuple(heads[1]), tuple(heads[2]))


def linear_attention(a: torch.Tensor, w: HeadWeights) -> torch.Tensor:
    """LA(A) = A W_Q W_Kᵀ Aᵀ A W_V per group and head, float64: (G, n, c) → (G, H, n, d_h).

    Computed as Q (Kᵀ V) so no n × n matrix is formed; no biases (Proposition 4.2's linear attention).
    """
    x = a.to(torch.float64)[:, None]  # (G, 1, n, c)
    q, k, v = (x @ m.to(x.device)[None] for m in (w.wq, w.wk, w.wv))  # (G, H, n, d_h)
    return q @ (k.mT @ v)


class ForwardAccumulator:
    """One layer of one forward (plain or conditioned); ``add`` each captured batch, then ``result``."""

    def __init__(
        self, spec: LayerSpec, weights: HeadWeights, kappas: WeightKappas, *, per_head: bool
    ) -> None:
        self.spec = spec
        self.weights = weights
        self.per_head = per_head
        self.kq = torch.tensor(kappas.wq_heads, dtype=torch.float64)  # (H,)
        self.kk = torch.tensor(kappas.wk_heads, dtype=torch.float64)
        self.kv = torch.tensor(kappas.wv_heads, dtype=torch.float64)
        self.kappa, self.kappa_a, self.mu_la = ScalarStream(), ScalarStream(), ScalarStream()
        self.mu_a, self.kappa_p = ScalarStream(), ScalarStream()
        H = len(kappas.wq_heads)
        self.head_mu_la = [ScalarStream() for _ in range(H)]
        self.head_la = [ScalarStream() for _ in range(H)]
        self.head_mu_a = [ScalarStream() for _ in range(H)]
        self.head_p = [ScalarStream() for _ in range(H)]
        self.below_x = self.below_a = self.below_p = 0

    def add(self, layer: LayerCapture, lengths: torch.Tensor | None) -> None:
        if layer.x_in is None or layer.attn_in is None:
            raise InternalError(
                f"{self.spec.name}: X_l or A_l was not captured", "report it with the model name"
            )
        sx = summarize_samples(trim(layer.x_in, lengths, (0,)), layer.x_in.dtype)
        self.kappa.extend(sx.kappa)
        self.below_x += int(sx.below.sum())
        attn = trim(layer.attn_in, lengths, (1,))  # per sample (G, n, c)
        sa = summarize_samples(attn, layer.attn_in.dtype)
        ka = sa.kappa  # (S, G)
        self.kappa_a.extend(ka.amax(-1))
        self.below_a += int(sa.below.any(-1).sum())
        mu_la = mu_linear_attention(self.kq, self.kk, self.kv, ka.amax(-1)[:, None])  # (S, H)
        self.mu_la.extend(mu_la.amax(-1))
        if layer.probs is not None:
            # P is low rank in practice (Linformer): κ(P) ≫ 300, a Gram attempt would be thrown away
            sp = summarize_samples(trim(layer.probs, lengths, (2, 3)), layer.probs.dtype, "svd")
            kp = sp.kappa  # (S, G, H)
            mu_a = mu_softmax_attention(kp, ka[..., None], self.kv)  # (S, G, H)
            self.mu_a.extend(mu_a.flatten(1).amax(-1))
            self.kappa_p.extend(kp.flatten(1).amax(-1))
            self.below_p += int(sp.below.flatten(1).any(-1).sum())
        if self.per_head:
            self._add_heads(attn, mu_la, None if layer.probs is None else (kp, mu_a))

    def _add_heads(
        self,
        attn: list[torch.Tensor],
        mu_la: torch.Tensor,
        probs: tuple[torch.Tensor, torch.Tensor] | None,
    ) -> None:
        la = torch.stack([condition_number(linear_attention(a, self.weights)).amax(0) for a in attn]).cpu()
        for h in range(len(self.head_mu_la)):
            self.head_mu_la[h].extend(mu_la[:, h])
            self.head_la[h].extend(la[:, h])
            if probs is not None:
                kp, mu_a = probs
                self.head_p[h].extend(kp[:, :, h].amax(-1))
                self.head_mu_a[h].extend(mu_a[:, :, h].amax(-1))

    def stats(self) -> ForwardStats:
        has_p = len(self.kappa_p) > 0
        return ForwardStats(
            kappa=self.kappa.result(),
            kappa_attn_input=self.kappa_a.result(),
            mu_la=self.mu_la.result(),
            mu_a=self.mu_a.result() if has_p else None,
            kappa_probs=self.kappa_p.result() if has_p else None,
            below_x=self.below_x,
            below_attn_input=self.below_a,
            below_probs=self.below_p if has_p else None,
        )

    def head_reports(self) -> tuple[HeadReport, ...] | None:
        if not self.per_head:
            return None
        has_p = len(self.kappa_p) > 0
        return tuple(
            HeadReport(
                head=h,
                mu_la=self.head_mu_la[h].result(),
                kappa_la=self.head_la[h].result(),
                mu_a=self.head_mu_a[h].result() if has_p else None,
                kappa_probs=self.head_p[h].result() if has_p else None,
            )
            for h in range(len(self.head_mu_la))
        )
