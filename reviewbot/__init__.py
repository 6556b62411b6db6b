"""reviewbot: finds blocking GPU->host syncs, mis-sized host buffers and missing docstrings."""

__version__ = "0.1.0"
