"""Errors that reach the user as one clear line (see driftline.cli.main)."""


class UserError(Exception):
    """Something the user can fix: bad option, unreachable service, bad file.

    The message says what went wrong and what to do; the CLI prints it on one
    line without a traceback and exits with `exit_code`.
    """

    exit_code = 1

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code
