"""A bench's stack home: a fresh temporary folder removed when the bench's process exits.

A stack's home holds its database, its Valkey's files and its logs (tens to hundreds of
megabytes); a bench that left them behind filled ``/tmp`` over a sitting of ``make
bench-compare``. The folder is removed at interpreter exit (``atexit``: a normal end or an
uncaught exception), after the bench has stopped its stack; a bench killed by a signal leaves
it, as any process does.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

__all__ = ["stack_home"]


def stack_home(prefix: str) -> Path:
    """A new empty folder named ``<prefix>…`` under the system's temporary folder."""
    home = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    return home
