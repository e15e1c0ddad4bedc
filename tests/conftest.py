import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def registry():
    from llmsim.spec.presets import PresetRegistry

    return PresetRegistry()


IN_PROCESS = {"sweep", "search", "estimate", "check"}  # commands whose tests run in this process (no start-up)


def run_cli(*args: str, env: dict | None = None, cwd: str | None = None) -> subprocess.CompletedProcess:
    """Run the real entry point (``main``) in a subprocess, as a user would; ``sweep``, ``search``,
    ``estimate`` and ``check`` (most of the calls, most of a second of start-up each: Python, numpy,
    pandas, pydantic, polars) run in this process through ``run_main`` (which fails the test on a
    traceback) unless the test sets the environment or the directory; other commands and global options
    first still start a process."""
    import os

    if env is None and cwd is None and args and args[0] in IN_PROCESS:
        code, out, err = run_main(*args)
        return subprocess.CompletedProcess(["llmsim", *args], code, out, err)

    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", "from llmsim.cli import main; main()", *args],
                          capture_output=True, text=True, env=full_env, cwd=cwd, check=False)


def run_main(*args: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    """Run the entry point (``main``) in this process, as ``llmsim ARGS`` would: (exit status, stdout,
    stderr). Anything but a clean exit (an exception escaping ``main``: a traceback) fails the test."""
    import contextlib
    import io
    import signal

    from llmsim.cli import main
    from llmsim.spec import yamlio

    yamlio._STDIN.clear()  # standard input is read once per process; each run here has its own
    out, err = io.StringIO(), io.StringIO()
    old_argv, old_stdin, old_term = sys.argv, sys.stdin, signal.getsignal(signal.SIGTERM)
    sys.argv = ["llmsim", *args]
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin or b""))
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main()
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    finally:
        sys.argv, sys.stdin = old_argv, old_stdin
        signal.signal(signal.SIGTERM, old_term)
        yamlio._STDIN.clear()
    return code, out.getvalue(), err.getvalue()


def assert_spec_error(tmp_path, text: str, key: str) -> None:
    """``llmsim estimate`` of the scenario ``text`` fails with one line, status 2, naming the file and ``key``."""
    path = tmp_path / "s.yaml"
    path.write_text(text)
    r = run_cli("estimate", str(path))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert str(path) in r.stderr and key in r.stderr, r.stderr


def one_network_per_shape() -> list[str]:
    """A network preset of each distinct shape (per tier: topology, in-network reduction, torus
    dimensions, a measured LL step): what the tuner's code paths depend on; 13 of the 22 presets."""
    from llmsim.spec.convert import network_values
    from llmsim.spec.presets import PresetRegistry

    reg, shapes = PresetRegistry([]), {}
    for name in sorted(reg.names("networks")):
        net = network_values(reg.get("networks", name))
        key = tuple((t.topology, t.in_network_reduction, len(t.dims), t.ll_latency_s is not None) for t in net.tiers)
        shapes.setdefault(key, name)
    return sorted(shapes.values())
