"""``python -m llmsim``: the command-line interface."""

from llmsim.cli import main

main()
