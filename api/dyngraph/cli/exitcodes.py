"""The exit status of every ``dyngraph`` command, and which error gives which.

    0  success (every case passed)
    1  a case ran and an output differs from the reference (``run``); the
       server could not start (``rpc-server``)
    2  a usage error: an unknown option, a malformed option value, a file
       that does not exist or cannot be read
    3  a case is unsupported (and nothing failed)
    4  a case is malformed or raised another typed error
  130  interrupted (Ctrl-C)

One mapping for all the commands: :func:`exit_code` of an exception.
"""

from __future__ import annotations

import os

from ..errors import DyngraphError, UnsupportedError

EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_UNSUPPORTED, EXIT_ERROR = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """The command line is wrong: exit status 2, with the usage text."""


def exit_code(e: BaseException) -> int:
    """The exit status for an error that ends a command (or a case of ``run``)."""
    from ..onednn.options import OptionError

    if isinstance(e, (UsageError, OptionError)):
        return EXIT_USAGE
    if isinstance(e, UnsupportedError):
        return EXIT_UNSUPPORTED
    if isinstance(e, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    if isinstance(e, DyngraphError):
        return EXIT_ERROR
    return EXIT_ERROR


def need_file(path: str, what: str = "file") -> str:
    """``path`` when it names a readable file, else a UsageError."""
    if not os.path.isfile(path):
        raise UsageError(f"{what} {path}: {'is a directory' if os.path.isdir(path) else 'no such file'}")
    if not os.access(path, os.R_OK):
        raise UsageError(f"{what} {path}: not readable")
    return path
