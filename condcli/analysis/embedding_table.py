"""The embedding table E (vocab × d) and an untied output head: full spectrum and κ in float64, input-free
(docs/math.md#embedding-table).

E is read in row chunks (:data:`RowReader`): a chunk is upcast to float64 on E's device, used and dropped, so
E is never held in float64 whole. Two paths, both streamed:

- **Gram**: G = EᵀE (d × d, float64) accumulated over the chunks, then ``eigvalsh``. Kept where
  :func:`condcli.spectra.core.gram_verdict` certifies every σ_i to within ``MEASURE_RTOL`` of float64 SVD
  (the analysis path's rule: the Gram error δ against σ_k², with float64's resolution as the floor).
- **TSQR** otherwise: R ← qr([R; chunk]).R over the chunks (Householder QR, backward stable), then the
  singular values of the k × d factor R, which are E's.

E is stored weights, so only float64 resolution limits what its κ means (as for an exact lookup):
σ_k ≤ max(V, d)·eps64·σ_1 gives κ = ``inf`` (:func:`condcli.spectra.core.kappa_from_sigma`), and a finite
κ carries the relative uncertainty max(V, d)·eps64·σ_1/σ_k (the digits it supports).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from condcli.errors import InputError
from condcli.reports.table import EmbeddingTableReport, TableSpectrum
from condcli.spectra._tensor import EPS64
from condcli.spectra.core import gram_verdict, kappa_from_sigma
from condcli.spectra.strategies import one_blas_thread

# rows [start, stop) of a table, in its stored dtype, on the device to compute on
RowReader = Callable[[int, int], torch.Tensor]
Method = Literal["auto", "gram", "tsqr"]

# bytes of one float64 chunk: 128 MiB (8192 rows of d = 2048). A chunk, the QR's stacked [R; chunk] and its
# copy inside the factorisation are the extra memory: measured by bench/bench_embedding_table.py.
CHUNK_BYTES = 128 << 20


def chunk_rows(shape: tuple[int, int]) -> int:
    """Rows per chunk: :data:`CHUNK_BYTES` of float64, at least d (a QR step then always has d rows to
    reduce), at most the table."""
    rows, d = shape
    return max(1, min(rows, max(d, CHUNK_BYTES // (8 * d))))


def tensor_rows(table: torch.Tensor) -> RowReader:
    """A :data:`RowReader` over a 2-D tensor (its rows are views: nothing is copied until upcast)."""
    w = table.detach()
    return lambda start, stop: w[start:stop]


def _chunks(read: RowReader, shape: tuple[int, int], what: str) -> Iterator[torch.Tensor]:
    rows, d = shape
    step = chunk_rows(shape)
    for start in range(0, rows, step):
        raw = read(start, min(rows, start + step))
        if raw.shape != (min(rows, start + step) - start, d) or not raw.is_floating_point():
            raise InputError(
                f"{what}: rows {start}… read as {tuple(raw.shape)} {raw.dtype}, not float rows of width {d}",
                "re-export the weights (save_pretrained or safetensors' save_file)",
            )
        if not bool(torch.isfinite(raw).all()):
            bad = int((~torch.isfinite(raw)).sum())
            raise InputError(
                f"{what} {shape} holds {bad} NaN/Inf value(s) in rows {start}…{start + raw.shape[0] - 1}",
                "the weights are damaged: re-export or replace them",
            )
        yield raw.to(torch.float64)


def gram_spectrum(read: RowReader, shape: tuple[int, int], what: str = "the table") -> torch.Tensor:
    """Descending eigenvalues of EᵀE (σ̂_i², float64, the top k = min(V, d)) from a chunked Gram sum."""
    gram: torch.Tensor | None = None
    for chunk in _chunks(read, shape, what):
        part = chunk.mT @ chunk
        gram = part if gram is None else gram.add_(part)
        del chunk, part
    assert gram is not None
    # on one MKL thread: a d × d eigvalsh is a long chain of small steps each ending at a barrier, and on 2
    # cores shared with another busy process MKL's 2 threads took 4.8 s for d = 768 where one thread takes
    # 0.08 s (docs/performance.md#the-embedding-table)
    with one_blas_thread():
        ev: torch.Tensor = torch.linalg.eigvalsh(gram).flip(-1)
    return ev[: min(shape)]


def tsqr_spectrum(read: RowReader, shape: tuple[int, int], what: str = "the table") -> torch.Tensor:
    """Descending singular values of E (float64, k = min(V, d)) from the R factor of a streamed QR."""
    r: torch.Tensor | None = None
    for chunk in _chunks(read, shape, what):
        stacked = chunk if r is None else torch.cat([r, chunk])
        del chunk
        r = torch.linalg.qr(stacked, mode="r").R
        del stacked
    assert r is not None
    sigma: torch.Tensor = torch.linalg.svdvals(r)
    return sigma[: min(shape)]


@dataclass(frozen=True)
class Spectrum:
    """σ of one table (descending float64) and which path gave it."""

    sigma: torch.Tensor
    method: Literal["gram", "tsqr"]


def table_spectrum(
    read: RowReader, shape: tuple[int, int], method: Method = "auto", what: str = "the table"
) -> Spectrum:
    """All k = min(V, d) singular values of the V × d table ``read`` yields, descending, float64, within
    ``MEASURE_RTOL`` of float64 SVD wherever they are above float64 resolution.

    ``method="auto"``: the Gram path where :func:`gram_verdict` certifies it (at float64's resolution),
    else TSQR (a second pass). ``"gram"``/``"tsqr"`` force one path (the bench compares them)."""
    rows, d = shape
    if rows < 1 or d < 1:
        raise InputError(f"{what} has shape {shape}", "a table needs at least one row and one column")
    if method == "tsqr":
        return Spectrum(tsqr_spectrum(read, shape, what), "tsqr")
    ev = gram_spectrum(read, shape, what)
    if method == "gram":
        return Spectrum(ev.clamp_min(0).sqrt(), "gram")
    sigma_1 = ev[:1].clamp_min(0).sqrt()
    tol = max(shape) * EPS64 * sigma_1  # float64 resolution: E is stored weights, no capture rounding
    measured, _ = gram_verdict(ev[None], tol, shape)
    if bool(measured[0]):
        return Spectrum(ev.clamp_min(0).sqrt(), "gram")
    return Spectrum(tsqr_spectrum(read, shape, what), "tsqr")


def spectrum_report(
    read: RowReader, shape: tuple[int, int], name: str, method: Method = "auto"
) -> TableSpectrum:
    """:func:`table_spectrum` as a report: shape, κ (``inf`` below float64 resolution), σ_1, σ_k, all σ."""
    got = table_spectrum(read, shape, method, f"`{name}`")
    sigma = got.sigma.cpu()
    kappa = float(kappa_from_sigma(sigma, shape))
    return TableSpectrum(
        name=name,
        shape=shape,
        kappa=kappa,
        sigma_max=float(sigma[0]),
        sigma_min=float(sigma[-1]),
        spectrum=tuple(float(v) for v in sigma),
        method=got.method,
    )


def _weight(module: object) -> torch.Tensor | None:
    """The 2-D floating weight of an embedding or head module, else None."""
    w = getattr(module, "weight", None) if isinstance(module, nn.Module) else None
    if not isinstance(w, torch.Tensor) or w.ndim != 2 or not w.is_floating_point():
        return None
    return w


def _call(model: nn.Module, getter: str) -> object:
    fn = getattr(model, getter, None)
    if not callable(fn):
        return None
    try:
        return fn()
    except (NotImplementedError, AttributeError):  # a base class without the method's attribute
        return None


def table_modules(model: nn.Module) -> list[nn.Module]:
    """The model's token-embedding module and output head, where it has them (a model with no vocabulary,
    e.g. wav2vec2, has neither)."""
    found = [_call(model, getter) for getter in ("get_input_embeddings", "get_output_embeddings")]
    return [m for m in found if isinstance(m, nn.Module)]


def tables_of(
    model: nn.Module,
) -> tuple[tuple[str, torch.Tensor] | None, tuple[str, torch.Tensor] | None, bool]:
    """(input table, output head, tied) of an HF-style model, each as (parameter name, weight) or None.

    ``tied``: the head's weight is the same Parameter (or the same storage) as the table's; the head is
    then None. A model without ``get_input_embeddings`` (timm ViTs), or whose input embedding is no 2-D
    float table, has none."""
    emb = _weight(_call(model, "get_input_embeddings"))
    if emb is None:
        return None, None, False
    head = _weight(_call(model, "get_output_embeddings"))
    names: dict[int, str] = {}
    for n, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), n)  # a tied weight by its first name (the one saved)
    table = (names.get(id(emb), "input embeddings"), emb)
    if head is None:
        return table, None, False
    tied = head is emb or (
        head.device.type != "meta"
        and head.device == emb.device
        and head.data_ptr() == emb.data_ptr()
        and head.shape == emb.shape
        and head.stride() == emb.stride()
    )
    return table, (None if tied else (names.get(id(head), "output embeddings"), head)), tied


def has_output_head(model: nn.Module) -> bool:
    """Whether the model has an output head over the vocabulary (``get_output_embeddings``)."""
    return _weight(_call(model, "get_output_embeddings")) is not None


def embedding_table_of(model: nn.Module, method: Method = "auto") -> EmbeddingTableReport | None:
    """κ(E) and E's full spectrum, and the output head's where it is not tied; None for a model with no
    token-embedding table (timm ViTs) or whose table sits on the meta device (offloaded to disk).

    Pass the whole model (``LlamaForCausalLM``, not its base ``LlamaModel``): a base model has no output
    head, and its report says ``tied`` None (no head seen)."""
    table, head, tied = tables_of(model)
    if table is None or table[1].device.type == "meta":
        return None
    e = spectrum_report(tensor_rows(table[1]), _shape(table[1]), table[0], method)
    h = None
    if head is not None and head[1].device.type != "meta":
        h = spectrum_report(tensor_rows(head[1]), _shape(head[1]), head[0], method)
    seen_head = tied or head is not None
    return EmbeddingTableReport.of(e, tied=tied if seen_head else None, lm_head=h)


def _shape(w: torch.Tensor) -> tuple[int, int]:
    return int(w.shape[0]), int(w.shape[1])
