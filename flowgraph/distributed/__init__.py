"""The distributed runtime (whitepaper §3.3): master, workers, the worker cache and their
messages; the local Session runs on an in-process master and worker (local.py)."""
