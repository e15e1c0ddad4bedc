import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def registry():
    from llmsim.spec.presets import PresetRegistry

    return PresetRegistry()


def run_cli(*args: str, env: dict | None = None, cwd: str | None = None) -> subprocess.CompletedProcess:
    """Run the real entry point (``main``) in a subprocess, as a user would."""
    import os

    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", "from llmsim.cli import main; main()", *args],
                          capture_output=True, text=True, env=full_env, cwd=cwd, check=False)
