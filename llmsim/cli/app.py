"""The typer app: global options, the commands of the sibling modules, and the exit-status contract.

Heavy modules (pandas, joblib, the engine) are imported inside the commands that need them, so
``llmsim --help`` stays fast.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
from pathlib import Path

import typer

from llmsim import __version__
from llmsim.atomic import WriteError
from llmsim.cli.collective import collective_cmd
from llmsim.cli.columns import columns_cmd
from llmsim.cli.design import cost_cmd, search_cmd, sweep_cmd
from llmsim.cli.estimate import check, estimate
from llmsim.cli.plot import make_plot_app
from llmsim.cli.presets import presets_app
from llmsim.cli.settings import settings_cmd
from llmsim.cli.validate import calibrate_cmd, validate_cmd
from llmsim.engine.errors import DesignError

app = typer.Typer(
    name="llmsim",
    help="Analytical performance and cost model for LLM training and inference systems.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"llmsim {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    presets: list[Path] = typer.Option(
        [], "--presets", metavar="DIR",
        help="Extra preset folder (with accelerators/, models/, networks/); repeatable; "
             "a user preset with a bundled name wins. Also LLMSIM_PRESETS=dir1:dir2."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    ctx.obj = {"preset_dirs": [str(p) for p in presets]}


app.add_typer(presets_app, name="presets")
app.command("check")(check)
app.command("estimate")(estimate)
app.command("collective")(collective_cmd)
app.command("validate")(validate_cmd)
app.command("calibrate")(calibrate_cmd)
app.command("sweep")(sweep_cmd)
app.command("search")(search_cmd)
app.command("cost")(cost_cmd)
app.command("columns")(columns_cmd)
app.command("settings")(settings_cmd)
app.add_typer(make_plot_app(estimate), name="plot")


class Terminated(KeyboardInterrupt):
    """SIGTERM (``timeout``, batch schedulers): unwinds like Ctrl-C, so temporary files are removed."""


_SIGNALLED: list[int] = []  # SIGTERM seen: joblib re-raises a plain KeyboardInterrupt from its workers


def _terminate(signum, frame) -> None:
    _SIGNALLED.append(signum)
    raise Terminated


def main() -> None:
    """Entry point: bad input is one line on stderr and exit status 2, never a traceback."""
    try:
        signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread (an embedding program): leave its handler alone
        pass
    try:
        app()
    except (DesignError, WriteError) as err:  # SpecError (bad input) is one; WriteError: -o on a full disk
        sys.stderr.write(f"llmsim: error: {err}\n")
        sys.exit(2)
    except KeyboardInterrupt:
        _stopped()
    except BrokenPipeError:  # e.g. `llmsim ... | head`: stop quietly
        _quiet_stdout()
        sys.exit(0)
    except SystemExit as done:  # click turns Ctrl-C into exit 130 and a closed stdout into exit 1
        causes = _causes(done)
        if any(isinstance(c, OSError) and c.errno == errno.EPIPE for c in causes):
            _quiet_stdout()
            sys.exit(0)
        if any(isinstance(c, KeyboardInterrupt) for c in causes):
            _stopped()
        raise


def _causes(err: BaseException) -> list[BaseException]:
    out, seen = [], set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        out.append(err)
        err = err.__cause__ or err.__context__
    return out


def _stopped() -> None:
    if _SIGNALLED:
        sys.stderr.write("llmsim: terminated\n")
        sys.exit(143)
    sys.stderr.write("llmsim: interrupted\n")
    sys.exit(130)


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so that flushing it at exit does not fail again on the closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    main()
