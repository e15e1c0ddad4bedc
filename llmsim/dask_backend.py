"""Sweeps on an existing Dask cluster through joblib's Dask backend (optional extra: llmsim[dask])."""

from __future__ import annotations

from llmsim.spec.errors import SpecError
from llmsim.sweep import SweepSpec, run


def run_on_dask(spec: SweepSpec, preset_dirs: tuple[str, ...], scheduler: str | None, front_only: bool = False):
    """The same chunks as a local run, executed by the Dask workers at ``scheduler`` (or a local cluster)."""
    try:
        import joblib
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise SpecError("--backend dask needs the dask extra: pip install 'llmsim[dask]'") from None
    cluster = None if scheduler else LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                                  dashboard_address=None)
    try:
        with Client(scheduler or cluster), joblib.parallel_config(backend="dask", wait_for_workers_timeout=60):
            return run(spec, preset_dirs, jobs=-1, front_only=front_only)
    except OSError as err:
        raise SpecError(f"--scheduler {scheduler}: cannot reach the Dask scheduler ({err})") from None
    finally:
        if cluster is not None:
            cluster.close()
