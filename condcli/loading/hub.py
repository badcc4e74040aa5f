"""Talking to the Hugging Face Hub (timm and transformers both download from it) — or failing in one line.

Offline, huggingface_hub retries each file for about a minute before it gives up. condcli checks once
whether the Hub answers (2 s); when it does not, loading runs in the Hub's offline mode, so that a model
already in the local cache still loads and anything else fails at once with a clear error.
"""

from __future__ import annotations

import os
import socket
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlparse

from condcli.errors import InputError

PROBE_TIMEOUT_S = 2.0
CONFIG_FIX = (
    "an HF id needs its config.json even for random weights: pass a local folder holding it as MODEL"
    " (and `checkpoint=FILE` for weights), or use a timm name with `weights=random`"
)
BUILD_ERRORS: tuple[type[Exception], ...] = (
    TypeError,
    RuntimeError,
    AttributeError,
    IndexError,
    AssertionError,
)
FIX = "use `weights=random` for a random-init model, or `checkpoint=FILE` with weights you have"


@dataclass(frozen=True)
class HubId:
    """A Hugging Face hub id being fetched; ``unprefixed``: typed without ``hf:`` (taken as a hub id because
    it is no local path, sample or timm name)."""

    repo: str
    unprefixed: bool = False

    def unfetchable(self, why: str) -> str:
        """One line: this hub id cannot be fetched, and ``why``."""
        taken = " (not a local path, a sample or a timm name)" if self.unprefixed else ""
        return f"{self.repo} is a Hugging Face hub id{taken} that cannot be fetched {why}"

    def local_fix(self) -> str:
        """How to point at a local copy instead."""
        # one literal, so the hub tool's own flag reads as part of its command line (not a flag of condcli's)
        fix = "where there is network (huggingface-cli download {} --local-dir DIR, or save_pretrained"
        return "download it " + fix.format(self.repo) + "(DIR)) and give that folder DIR as MODEL"


@lru_cache(maxsize=1)
def reachable() -> bool:
    """Whether the Hub's endpoint accepts a TCP connection (cached for the process)."""
    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    host, port = url.hostname or "huggingface.co", url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S):
            return True
    except OSError:
        return False


def offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE) or os.environ.get("HF_HUB_OFFLINE", "") in {"1", "true", "TRUE"}


@contextmanager
def loading(what: str, remote: bool, fix: str = FIX, hub_id: HubId | None = None) -> Iterator[None]:
    """Wrap one load of ``what``; ``remote``: it may need the Hub; ``fix``: what to tell the user offline;
    ``hub_id``: the hub id ``what`` is fetched from, named as such when it cannot be (offline: how to point
    at a local folder instead)."""
    from huggingface_hub import constants

    _quiet()
    saved = constants.HF_HUB_OFFLINE
    told_offline = offline()  # HF_HUB_OFFLINE set by the user (before condcli sets it below)
    go_offline = remote and (told_offline or not reachable())
    if go_offline:
        constants.HF_HUB_OFFLINE = True
    try:
        with warnings.catch_warnings():
            # complex weights cast to real: condcli refuses them after loading (weights_files.check_real)
            warnings.filterwarnings("ignore", message="Casting complex values")
            yield
    except (ValueError, KeyError) as e:  # transformers' "unrecognized model", bad config values, …
        if "trust_remote_code" in str(e):
            raise InputError(
                f"{what} needs to run code from its repository to load",
                "pass `trust_remote_code=True` if you trust that code",
            ) from e
        raise InputError(
            f"cannot load {what}: {_short(e)}",
            "check that it is a model transformers/timm support (model_type / architecture in config.json)",
        ) from e
    except (OSError, ConnectionError) as e:  # includes huggingface_hub's LocalEntryNotFoundError
        if remote and hub_id is not None:
            if go_offline:
                reason = "HF_HUB_OFFLINE is set" if told_offline else "the hub is not reachable"
                line = hub_id.unfetchable(f"offline ({reason}) and is not in the local cache")
            else:
                line = hub_id.unfetchable(f"({_short(e)})")
            raise InputError(line, hub_id.local_fix()) from e
        if remote:
            why = "the Hugging Face Hub is not reachable" if go_offline else _short(e)
            raise InputError(f"cannot fetch {what}: {why} and it is not in the local cache", fix) from e
        raise InputError(f"cannot load {what}: {_short(e)}", "check the folder and its files") from e
    except MemoryError as e:
        raise InputError(f"cannot load {what}: out of memory", "use a smaller model or more memory") from e
    except BUILD_ERRORS + _strict_errors() as e:
        # a config value of the wrong type, weights that do not fit the config (size mismatch), …
        why = _short(e)
        if "ignore_mismatched_sizes" in str(e):  # transformers' report went to its log
            why = "its weights hold tensors of other shapes than its config.json describes"
        raise InputError(
            f"cannot load {what}: {why}",
            "check that config.json and the weights files belong together (save the model again)",
        ) from e
    finally:
        constants.HF_HUB_OFFLINE = saved


@lru_cache(maxsize=1)
def _quiet() -> None:
    """No download/loading progress bars or advice on stderr: condcli prints its own lines."""
    from huggingface_hub.utils import disable_progress_bars  # type: ignore[attr-defined]
    from transformers.utils import logging

    disable_progress_bars()
    logging.disable_progress_bar()
    logging.set_verbosity_error()


def _strict_errors() -> tuple[type[Exception], ...]:
    """huggingface_hub's config validation errors (transformers 5 configs are strict dataclasses)."""
    try:
        from huggingface_hub.errors import StrictDataclassError
    except ImportError:
        return ()
    return (StrictDataclassError,)


def _short(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    # never relay a library's advice to load a pickle unsafely
    text = ". ".join(part for part in text.split(". ") if "weights_only" not in part)
    return text[:200] + ("…" if len(text) > 200 else "")
