"""condcli — spectral diagnostics for transformer embeddings."""

__version__ = "0.1.0"
