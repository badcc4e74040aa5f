"""The generic adapter: any model that is not a known family, read from its own modules and proven on its
first batch (:mod:`condcli.adapters.generic.build` builds it; the other modules each read one thing)."""

from condcli.adapters.generic.build import build, matches

__all__ = ["build", "matches"]
