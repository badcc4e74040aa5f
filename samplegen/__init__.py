"""How ``sample_checkpoints/`` is made.

``make samples`` (``python -m samplegen.build``) trains every sample on CPU, deterministically, from data
that needs no download. This package is not part of the installed ``condcli`` package.
"""
