"""The command line run in this process, as a test calls it: `code, out, err = run_cli(["detect", ...], capfd)`."""
from __future__ import annotations

from typing import Any

from driftline.cli import main


def run_cli(args: list[str], capture: Any) -> tuple[int, str, str]:
    """`driftline ARGS` in this process: (exit code, stdout, stderr); `capture` is pytest's `capfd` or `capsys`,
    whose buffers are read (and emptied) here."""
    code = 0
    try:
        main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capture.readouterr()
    return code, out, err


def run_detect(args: list[str], capture: Any) -> tuple[int, str, str]:
    """`driftline detect ARGS` in this process (batch mode): (exit code, stdout, stderr)."""
    return run_cli(["detect", *args], capture)
