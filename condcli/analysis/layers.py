"""Per-layer quantities (docs/math.md#layers) over a stream of captured layers: κ(X_l), κ(A_l), κ(W), μ(LA),
μ(A).

Attention groups (Swin/DaViT windows) are matrices of their own: a sample's κ(A_l) is its worst group's,
and μ is taken per group and head and then maximised, so μ(A) pairs each P with the A_l it came from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import torch

from condcli.adapters.base import HeadWeights, LayerSpec, Rotation, join_heads
from condcli.analysis import headmax
from condcli.analysis.persample import (
    ShortenedSequence,
    Summaries,
    distinct_summaries,
    head_chunks,
    summarize_heads,
    summarize_samples,
    trim,
)
from condcli.capture import LayerCapture
from condcli.errors import InputError, InternalError
from condcli.reports.metrics import FLAGS, FORWARD, HEAD, MIXING_FLAG, ROW_FLAGS, WEIGHTS
from condcli.reports.refusal import Refused
from condcli.reports.spectrum import ForwardStats, HeadReport, WeightKappas
from condcli.spectra import (
    ScalarStream,
    attention_entropy,
    condition_number,
    mu_linear_attention,
    mu_softmax_attention,
    sink_score,
    stable_rank_of_spectrum,
)
from condcli.spectra.aggregate import ShardOrder, check_fields
from condcli.spectra.core import Method, gram_decides_floors
from condcli.spectra.strategies import concurrently, thread_map
from condcli.spectra.uncertainty import max_rel, power_rel, product_rel

PROJECTIONS: tuple[Literal["q", "k", "v"], ...] = ("q", "k", "v")


def weight_kappas(w: HeadWeights) -> WeightKappas:
    """κ of the full projections (SVD: square d×d weights are rarely within the Gram path's κ ≤ 300) and of
    every head's d×d_h slice (Gram path where it agrees with SVD, SVD elsewhere).

    Under grouped-query attention W_K and W_V are d × (H_kv·d_h) and have H_kv slices; the per-head lists
    hold one entry per query head, the κ of the KV slice it reads.
    """
    return weight_kappas_of({0: w})[0]


def weight_kappas_of(weights: Mapping[int, HeadWeights]) -> dict[int, WeightKappas]:
    """:func:`weight_kappas` of every layer: :func:`whole_kappas_of` and :func:`head_kappas`."""
    whole = whole_kappas_of(weights)
    return {i: WeightKappas(whole[i], head_kappas(w), kv_heads=w.kv_heads) for i, w in weights.items()}


def whole_kappas_of(weights: Mapping[int, HeadWeights]) -> dict[int, dict[str, float]]:
    """κ of the full projections W_Q, W_K, W_V of every layer (the registry's weight keys), by SVD: all layers
    over one thread pool rather than three at a time. Each matrix is its own decomposition, so every κ is
    the one a layer alone gives; each is assembled from its heads inside the task that decomposes it, so no
    stack of them all is built first (docs/performance.md#weight-condition-numbers). Only reports read
    them: ``condcli spectrum`` computes them beside its forward (:mod:`condcli.analysis.meanwhile`)."""
    jobs = [(i, j, getattr(w, f"w{name}")) for i, w in weights.items() for j, name in enumerate(PROJECTIONS)]
    mats = [m for _, _, m in jobs]
    if all(m.device.type == "cpu" for m in mats):
        got = thread_map(_full_kappa, mats)
    else:
        got = [_full_kappa(m) for m in mats]
    whole: dict[int, dict[str, float]] = {i: {} for i in weights}
    for (i, j, _), k in zip(jobs, got, strict=True):
        whole[i][WEIGHTS[j].key] = float(k)  # kappa_wq, kappa_wk, kappa_wv: the order of PROJECTIONS
    return whole


def _full_kappa(heads: torch.Tensor) -> torch.Tensor:
    """κ (0-d) of the whole projection whose heads are ``heads`` (H, d, d_h), by SVD: the matrix
    :meth:`HeadWeights.full` builds, heads side by side."""
    return condition_number(join_heads(heads), method="svd")


def head_kappas(w: HeadWeights) -> dict[str, tuple[float, ...]]:
    """κ of every query head's slice of W_Q, W_K and W_V by the registry's weight keys (Gram path where it
    agrees with SVD); under grouped-query attention W_K's and W_V's are the KV slice each query head reads.
    What the per-layer analysis reads (μ per head), so computed before the forward."""
    if w.kv_heads == w.heads and w.wq.shape == w.wv.shape:
        heads = condition_number(torch.stack([w.wq, w.wk, w.wv])).tolist()  # (3, H)
    else:
        kv = w.kv_index()
        heads = [condition_number(m).tolist() for m in (w.wq, w.wk, w.wv)]
        heads = [heads[0], [heads[1][g] for g in kv], [heads[2][g] for g in kv]]
    keys = [m.key for m in WEIGHTS]  # kappa_wq, kappa_wk, kappa_wv: the order of PROJECTIONS
    return {key: tuple(h) for key, h in zip(keys, heads, strict=True)}


Projections = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # W_Q, W_K, W_V per query head (H, d, d_h)


def query_projections(w: HeadWeights, device: torch.device) -> Projections:
    """W_Q, and W_K and W_V as each query head reads them (its KV head's slice), on ``device``."""
    return w.wq.to(device), w.per_query("k").to(device), w.per_query("v").to(device)


def linear_attention(
    a: torch.Tensor, projections: Projections, rotation: Rotation | None = None
) -> torch.Tensor:
    """LA(A) = A W_Q W_Kᵀ Aᵀ A W_V per group and head, float64: (G, n, c) → (G, H, n, d_h).

    Computed as Q (Kᵀ V) so no n × n matrix is formed; no biases (Proposition 4.2's linear attention). Each
    query head uses the KV head it reads (grouped-query attention). ``rotation``: the model's own rotation of
    q and k at positions 0..n−1 (RoPE), applied as the model applies it: LA = R(Q) R(K)ᵀ V. ``projections``:
    the layer's :func:`query_projections` on a's device.
    """
    x = a.to(torch.float64)[:, None]  # (G, 1, n, c)
    q, k, v = (x @ m[None] for m in projections)  # (G, H, n, d_h)
    if rotation is not None:
        q, k = rotation(q, k)
    return q @ (k.mT @ v)


class ForwardAccumulator:
    """One layer of one forward (plain or conditioned); ``add`` each captured batch, then ``stats``.

    One stream per forward metric of :data:`condcli.reports.metrics.FORWARD`; metrics computed from P stay
    empty
    where the family's P cannot be observed, and are then reported as absent.
    """

    def __init__(
        self,
        spec: LayerSpec,
        weights: HeadWeights,
        heads: Mapping[str, Sequence[float]],
        *,
        per_head: bool,
    ) -> None:
        self.spec = spec
        self.weights = weights
        self.per_head = per_head
        # κ(W_Q^h), κ(W_K^h), κ(W_V^h) per query head (:func:`head_kappas`)
        self.kq = torch.tensor(heads["kappa_wq"], dtype=torch.float64)  # (H,)
        self.kk = torch.tensor(heads["kappa_wk"], dtype=torch.float64)
        self.kv = torch.tensor(heads["kappa_wv"], dtype=torch.float64)
        # flagged metrics carry per-sample floor marks (docs/math.md#spectra): a κ below resolution is
        # reported as σ_1/tol
        self.streams = {m.key: ScalarStream(floors=m.flag is not None) for m in FORWARD}
        H = len(self.kq)
        # per head metric of :data:`condcli.reports.metrics.HEAD`, one stream per head (H(P) is always kept:
        # the
        # report lists each head's entropy even without ``--heads``)
        self.heads = {m.key: [ScalarStream(floors=m.flag is not None) for _ in range(H)] for m in HEAD}
        self.below = {flag: 0 for flag in FLAGS}
        # samples whose matrix has exactly repeated rows, fewer distinct than k: κ = inf, not a floor
        self.repeated = {flag: 0 for flag in ROW_FLAGS}
        self.distinct = ScalarStream()  # X_l's distinct rows per sample
        self.rows = ScalarStream()  # X_l's rows per sample: the block's own length (a pooled block's is less)

    def add(self, layer: LayerCapture, lengths: torch.Tensor | None) -> None:
        try:
            self._add(layer, lengths)
        except ShortenedSequence as e:  # a pooled block or a chunk of keys, with padded samples (issue 42)
            why = e.message.removeprefix("[inputs] ")
            raise InputError(f"[inputs] layer {self.spec.name}: {why}", e.hint) from e

    def _add(self, layer: LayerCapture, lengths: torch.Tensor | None) -> None:
        if layer.x_in is None or layer.attn_in is None:
            raise InternalError(
                f"{self.spec.name}: X_l or A_l was not captured", "report it with the model name"
            )
        put = self.streams
        xs = trim(layer.x_in, lengths, (0,))
        attn = trim(layer.attn_in, lengths, (1,))  # per sample (G, n, c)
        x_dtype, a_dtype = layer.x_in.dtype, layer.attn_in.dtype

        def x_part() -> tuple[Summaries, Summaries | None]:
            whole = summarize_samples(xs, x_dtype, repeats=True)
            return whole, distinct_summaries(xs, x_dtype, whole)

        def a_part() -> tuple[Summaries, Summaries | None]:
            return summarize_samples(attn, a_dtype, repeats=True), None

        # X_l's summaries and A_l's side by side on the pool: bitwise as one after the other, and a long
        # prompt (one sample, one matrix each) keeps both cores busy
        (sx, sd), (sa, _) = concurrently([x_part, a_part])
        assert sd is not None
        put["kappa"].extend(sx.reported, sx.below, sx.uncertainty)
        put["stable_rank"].extend(torch.stack([stable_rank_of_spectrum(s) for s in sx.sigma]))
        self.below["x"] += int(sx.below.sum())
        assert sx.distinct is not None and sx.repeated is not None
        self.distinct.extend(sx.distinct)
        self.rows.extend([int(m.shape[-2]) for m in xs])
        self.repeated["x"] += int(sx.repeated.sum())
        put["kappa_distinct"].extend(sd.reported, sd.below, sd.uncertainty)
        self.below["x_distinct"] += int(sd.below.sum())
        ka = sa.reported  # (S, G): floors where A_l is below resolution, inf where its rows repeat
        assert sa.repeated is not None
        a_repeated = sa.repeated.any(-1)  # (S,) κ(A_l) = inf exactly in some group
        self.repeated["attn_input"] += int(a_repeated.sum())
        # (S,) a floor in any group makes the max over groups a floor, unless another group is exactly inf
        a_floor = sa.below.any(-1) & ~a_repeated
        ka_max, ka_rel = max_rel(ka, sa.uncertainty, -1)  # (S,) the worst group and its uncertainty
        put["kappa_attn_input"].extend(ka_max, a_floor, ka_rel)
        self.below["attn_input"] += int(a_floor.sum())
        mu_la = mu_linear_attention(self.kq, self.kk, self.kv, ka_max[:, None])  # (S, H)
        mu_la_rel = power_rel(ka_rel, 3)  # the weights are stored exactly: κ(A_l)³ alone is uncertain
        put["mu_la"].extend(mu_la.amax(-1), a_floor, mu_la_rel)
        probs = None
        if layer.probs is not None:
            p = trim(layer.probs, lengths, (2, 3))  # per sample (G, H, q, k)
            probs = self._add_probs(p, layer.probs.dtype, (ka, sa.uncertainty), sa.below)
            entropy = torch.stack([_head_entropy(m, self.spec) for m in p]).cpu()  # (S, H)
            put["attention_entropy"].extend(entropy.amin(-1))
            for h, stream in enumerate(self.heads["attention_entropy"]):
                stream.extend(entropy[:, h])
            sink = torch.stack([_head_sink(m, self.spec) for m in p]).cpu()  # (S, H)
            put["sink"].extend(sink.amax(-1))
            for h, stream in enumerate(self.heads["sink"]):
                stream.extend(sink[:, h])
        if self.per_head:
            self._add_heads(attn, (mu_la, a_floor, mu_la_rel), probs)

    def _add_probs(
        self,
        p: list[torch.Tensor],
        dtype: torch.dtype,
        ka_rel: tuple[torch.Tensor, torch.Tensor],
        a_below: torch.Tensor,
    ) -> tuple[torch.Tensor, ...] | None:
        """κ(P), κ(M) and μ(A) of one batch into the streams, from P per sample (G, H, q, k), κ(A_l) (S, G)
        with its relative uncertainty and A_l's floors; returns the per-head values ``_add_heads`` needs (None
        where it gets none).

        Only the maxima over heads are reported without ``--heads``: where :mod:`condcli.analysis.headmax`
        is on, they come from the heads that can decide them, the same numbers as decomposing every head."""
        put = self.streams
        ka, a_rel = ka_rel
        heads = int(self.kv.numel())
        shown = {int(m.shape[-3]) for m in p}
        if shown - {heads}:  # P laid with its heads on another axis (HaloNet: heads × blocks), never guessed
            raise Refused(
                "p-unobservable",
                f"layer {self.spec.name}: P cannot be observed: its weights were taken as (groups, heads, q,"
                f" k) = {tuple(p[0].shape)}, {sorted(shown)} heads where the layer has {heads}: a layout"
                " condcli cannot tell apart",
                "run 'condcli inspect' to see what was found; describe the attention in a TOML file passed "
                "as `adapter` (docs/guides/your-own-model.md)",
            )
        method = _probs_method(p, dtype)
        tokens = max((int(m.shape[-1]) for m in p), default=0)
        prune = bool(p) and headmax.enabled(p[0].device, causal=self.spec.causal, tokens=tokens)
        if not self.per_head and self.spec.mixing is None and prune:
            hm = headmax.head_maxima(p, dtype, method, ka, self.kv, a_rel)
            if hm is not None:
                put["mu_a"].extend(hm.mu, hm.floor | a_below.any(-1), hm.mu_rel)
                put["kappa_probs"].extend(hm.kappa, hm.floor, hm.kappa_rel)
                self.below["probs"] += int(hm.floor.sum())
                return None
        # a few heads at a time, since a long sequence's P is H × n² numbers per sample
        sp = summarize_heads(p, dtype, method)
        # (S, G, H): κ(P), the floors σ_1/tol where P is below resolution, and the relative uncertainties
        kp, p_floor, p_rel = sp.reported, sp.below, sp.uncertainty
        km, m_floor, m_rel = kp, p_floor, p_rel  # κ of the matrix that mixes the tokens: P, or the layer's M
        if self.spec.mixing is not None:
            mixes = [self._mixing(m) for m in p]
            sm = summarize_heads(mixes, dtype, _probs_method(mixes, dtype))
            km, m_floor, m_rel = sm.reported, sm.below, sm.uncertainty
            self.below[MIXING_FLAG] += int(m_floor.flatten(1).any(-1).sum())
            put["kappa_mixing"].extend(*_max_of(km, m_floor, m_rel))
        mu_a = mu_softmax_attention(km, ka[..., None], self.kv)  # (S, G, H)
        mu_a_rel = product_rel(m_rel, a_rel[..., None])  # κ(W_V) is stored exactly
        mu_a_floor = m_floor | a_below[..., None]  # (S, G, H) either factor a floor
        put["mu_a"].extend(*_max_of(mu_a, mu_a_floor, mu_a_rel))
        put["kappa_probs"].extend(*_max_of(kp, p_floor, p_rel))
        self.below["probs"] += int(p_floor.flatten(1).any(-1).sum())
        return (kp, mu_a, km, p_floor, mu_a_floor, m_floor, p_rel, mu_a_rel, m_rel)

    def _add_heads(
        self,
        attn: list[torch.Tensor],
        mu_la_floor: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
        probs: tuple[torch.Tensor, ...] | None,
    ) -> None:
        mu_la, a_floor, mu_la_rel = mu_la_floor
        rotation = self.spec.rotation
        # W_Q, W_K, W_V per query head on the math device, once per batch rather than per sample and rotation
        # (a model spread over devices keeps its weights on others; GQA repeats each KV slice), and not kept
        # beyond it (for a large GQA model they are H/H_kv times W_K and W_V, in float64, per layer)
        w = query_projections(self.weights, attn[0].device if attn else self.weights.wq.device)
        la = torch.stack([self._kappa_la(a, rotation, w) for a in attn]).cpu()
        plain = (
            torch.stack([self._kappa_la(a, None, w) for a in attn]).cpu() if rotation is not None else None
        )
        put = self.heads
        for h in range(len(put["mu_la"])):
            put["mu_la"][h].extend(mu_la[:, h], a_floor, mu_la_rel)
            put["kappa_la"][h].extend(la[:, h])
            if plain is not None:
                put["kappa_la_unrotated"][h].extend(plain[:, h])
            if probs is not None:
                kp, mu_a, km, p_floor, mu_a_floor, m_floor, p_rel, mu_a_rel, m_rel = probs
                put["kappa_probs"][h].extend(*_max_of(kp[:, :, h], p_floor[:, :, h], p_rel[:, :, h]))
                if self.spec.mixing is not None:
                    put["kappa_mixing"][h].extend(*_max_of(km[:, :, h], m_floor[:, :, h], m_rel[:, :, h]))
                put["mu_a"][h].extend(*_max_of(mu_a[:, :, h], mu_a_floor[:, :, h], mu_a_rel[:, :, h]))

    def _mixing(self, p: torch.Tensor) -> torch.Tensor:
        """One sample's M = mixing(P) (G, H, q, k), from P in float64."""
        assert self.spec.mixing is not None
        with torch.no_grad():
            return self.spec.mixing(p.to(torch.float64)).to(torch.float64)

    def _kappa_la(self, a: torch.Tensor, rotation: Rotation | None, projections: Projections) -> torch.Tensor:
        """(H,) one sample's κ(LA) per head: the worst of its groups."""
        return condition_number(linear_attention(a, projections, rotation)).amax(0)

    def export_shard(self) -> dict[str, Any]:
        """This process's per-sample state, picklable (torchrun: :mod:`condcli.analysis.gather`)."""
        check_fields(
            self,
            {
                "spec",
                "weights",
                "per_head",
                "kq",
                "kk",
                "kv",
                "streams",
                "below",
                "heads",
                "repeated",
                "distinct",
                "rows",
            },
        )
        return {
            "streams": {k: s.export_shard() for k, s in self.streams.items()},
            "below": dict(self.below),
            "repeated": dict(self.repeated),
            "distinct": self.distinct.export_shard(),
            "rows": self.rows.export_shard(),
            "heads": {k: [s.export_shard() for s in per_head] for k, per_head in self.heads.items()},
        }

    def absorb_shards(self, parts: Sequence[dict[str, Any]], order: ShardOrder) -> None:
        """Every process's :meth:`export_shard`, in sample order."""
        name = f"layer {self.spec.index}"
        for key, s in self.streams.items():
            s.absorb_shards([p["streams"][key] for p in parts], order, f"{name} {key}")
        for key, per_head in self.heads.items():
            for h, s in enumerate(per_head):
                s.absorb_shards([p["heads"][key][h] for p in parts], order, f"{name} {key}[{h}]")
        self.below = {k: sum(p["below"][k] for p in parts) for k in self.below}
        self.repeated = {k: sum(p["repeated"][k] for p in parts) for k in self.repeated}
        self.distinct.absorb_shards([p["distinct"] for p in parts], order, f"{name} distinct_rows")
        self.rows.absorb_shards([p["rows"] for p in parts], order, f"{name} rows")

    @property
    def has_probs(self) -> bool:
        return len(self.streams["kappa_probs"]) > 0

    def stats(self) -> ForwardStats:
        has_p = self.has_probs
        has_m = has_p and self.spec.mixing is not None
        values = {
            m.key: self.streams[m.key].result()
            if (has_p or not m.needs_probs) and (has_m or not m.needs_mixing)
            else None
            for m in FORWARD
        }
        below: dict[str, int | None] = dict(self.below)
        if not has_p:
            below["probs"] = None
        if not has_m:
            below[MIXING_FLAG] = None
        return ForwardStats(values, below, dict(self.repeated), self.distinct.result(), self.rows.result())

    def entropy_heads(self) -> tuple[float, ...] | None:
        """Per head, the median over samples of H(P); None where P was not observed."""
        return self._head_medians("attention_entropy")

    def sink_heads(self) -> tuple[float, ...] | None:
        """Per head, the median over samples of the sink score; None where P was not observed."""
        return self._head_medians("sink")

    def _head_medians(self, key: str) -> tuple[float, ...] | None:
        if not self.has_probs:
            return None
        return tuple(s.result().median for s in self.heads[key])

    def head_reports(self) -> tuple[HeadReport, ...] | None:
        if not self.per_head:
            return None
        has = {
            m.key: (self.has_probs or not m.needs_probs)
            and (self.spec.mixing is not None or not m.needs_mixing)
            and (self.spec.rotation is not None or not m.needs_rotation)
            for m in HEAD
        }
        return tuple(
            HeadReport(h, {k: streams[h].result() if has[k] else None for k, streams in self.heads.items()})
            for h in range(len(self.heads["mu_la"]))
        )


def _max_of(
    values: torch.Tensor, floors: torch.Tensor, rel: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per sample (S, ...) → (S,): the largest value, whether any is a floor, and the relative uncertainty of
    the value that attains the largest (condcli.spectra.uncertainty)."""
    best, best_rel = max_rel(values.flatten(1), rel.flatten(1), -1)
    return best, floors.flatten(1).any(-1), best_rel


def _probs_method(p: list[torch.Tensor], dtype: torch.dtype) -> Method:
    """P is low rank in practice (Linformer): κ(P) ≫ 1e4, beyond what the Gram path measures to 1e-6. A Gram
    attempt pays only where it can certify floors without an SVD (bf16/fp16 captures); in float32 it cannot
    (tol² < the Gram error), so P goes to SVD straight away."""
    if not p:
        return "svd"
    shape = (int(p[0].shape[-2]), int(p[0].shape[-1]))
    return "auto" if gram_decides_floors(dtype, shape) else "svd"


# q·k of a head from which H(P) runs a head per task on the thread pool (docs/performance.md)
ENTROPY_THREADED = 512 * 512


def _head_sink(p: torch.Tensor, spec: LayerSpec) -> torch.Tensor:
    """(G, H, q, k) one sample's P → (H,): the sink score per head, the mean over its groups (only P's first
    column is upcast, so no chunking is needed)."""
    return sink_score(p, causal=spec.causal).mean(0)


def _head_entropy(p: torch.Tensor, spec: LayerSpec) -> torch.Tensor:
    """(G, H, q, k) one sample's P → (H,): H(P) per head, the mean over its groups (windows), computed a few
    heads at a time (float64 copies of every head of a long sequence would not fit); from
    :data:`ENTROPY_THREADED` entries a head on, one head per task on the CPU thread pool (the same values:
    each row's sum and each matrix's mean are the same whatever the heads around it)."""
    if p.device.type == "cpu" and p.shape[-2] * p.shape[-1] >= ENTROPY_THREADED and p.shape[1] > 1:
        got = thread_map(
            lambda m: attention_entropy(m, causal=spec.causal, window=spec.window), list(p.unbind(1))
        )
        return torch.stack(got, -1).mean(0)
    parts = [attention_entropy(c, causal=spec.causal, window=spec.window) for (c,) in head_chunks([p])]
    return torch.cat(parts, -1).mean(0)
