"""Why a layer or a model yields no number, as a code and a sentence (docs/math.md#json:
``layers_refused[i].reason``).

The codes (each derived from what a forward of the model showed, never a default message):

- ``no-attention``: no softmax over keys was computed and no attention module ran;
- ``linear-attention``: an attention module ran and computed no softmax, or a softmax ran over scores that
  are no query–key product and its weights multiplied the tokens (EfficientViM's ``softmax(dt + A)``): no
  P exists;
- ``qkv-unreadable``: attention was seen (a softmax inside an attention module), and what stands between X
  and q/k/v (a convolution, a norm, experts, a latent projection, parameters used in einsum) is named;
- ``p-unobservable``: Q/K/V were read, P cannot be observed, and why;
- ``inputs``: the model needs other inputs than it was given, and which.

A refusal travels as text ``"[code] sentence"`` (a layer's ``refused``, an error's message): the one-line
error starts with its code, and :func:`split` gives the report's ``{code, text}``.
"""

from __future__ import annotations

import re
from typing import Literal, get_args

from condcli.errors import InputError

Code = Literal["no-attention", "linear-attention", "qkv-unreadable", "p-unobservable", "inputs"]
CODES: tuple[str, ...] = get_args(Code)
_CODED = re.compile(r"^\[(" + "|".join(map(re.escape, CODES)) + r")\] ?")


def coded(code: Code, text: str) -> str:
    """``text`` marked with its refusal code."""
    return f"[{code}] {text}"


def split(text: str) -> tuple[str | None, str]:
    """(code, sentence) of a refusal's text; (None, text) where it carries no code."""
    m = _CODED.match(text)
    return (m.group(1), text[m.end() :]) if m else (None, text)


class Refused(InputError):
    """The model yields no layer number: the message starts with its refusal code."""

    def __init__(self, code: Code, message: str, hint: str | None = None) -> None:
        self.code = code
        super().__init__(coded(code, message), hint)
