"""moto's S3 server with each request atomic, as S3's are: ``python moto_serve.py HOST PORT``.

moto handles requests on a threaded server with nothing held across a request: a PUT checks
``If-Match`` / ``If-None-Match`` against the stored object and writes afterwards, and a GET reads
an object's body and its ETag apart. Two conditional writes racing on one key can both pass the
check (S3 refuses the second with 412), and a GET racing a PUT can pair one version's body with
the other's ETag. The file store's appends on an object store rely on both (a rewrite of what was
read, over the version read, retried when another writer got there first): a test of racing
appends lost a line once in a CI run, on moto alone. Here moto's own application handles one
request at a time (its response included); everything else is as ``python -m moto.server`` runs
it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import run_simple

Wsgi = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def one_at_a_time(app: Wsgi) -> Wsgi:
    """``app`` handling each request whole (its response included) under one lock."""
    lock = threading.Lock()

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        with lock:
            return list(app(environ, start_response))

    return wrapped


def main(host: str, port: int) -> None:
    moto = DomainDispatcherApplication(create_backend_app)
    moto.debug = True  # type: ignore[attr-defined]  # as moto.server sets it
    run_simple(
        host,
        port,
        one_at_a_time(moto),
        threaded=True,
        request_handler=MotoRequestHandler,
    )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
