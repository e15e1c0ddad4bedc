"""Sweeps on an existing Dask cluster through joblib's Dask backend (optional extra: llmsim[dask])."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from llmsim.spec.errors import SpecError


@contextmanager
def on_dask(scheduler: str | None) -> Iterator[None]:
    """joblib work inside runs on the Dask workers at ``scheduler`` (none: a local cluster of 2)."""
    try:
        import joblib
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise SpecError("--backend dask needs the dask extra: pip install 'llmsim[dask]'") from None
    cluster = None if scheduler else LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                                  dashboard_address=None)
    try:
        try:
            client = Client(scheduler or cluster)
        except (OSError, ValueError, TypeError) as err:
            raise SpecError(f"--scheduler {scheduler}: cannot reach the Dask scheduler ({err})") from None
        with client, joblib.parallel_config(backend="dask", wait_for_workers_timeout=60):
            yield
    finally:
        if cluster is not None:
            cluster.close()
