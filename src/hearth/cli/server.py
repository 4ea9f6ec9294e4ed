"""hearth serve: the HTTP API and web UI, with background work started once the port is open."""

from __future__ import annotations

import click

from ..engine import Hearth
from .base import Context, cli, err_console, pass_ctx


# -- server ---------------------------------------------------------------------------------------
@cli.command()
@click.option("--host", help="Address to bind (default 127.0.0.1).")
@click.option("--port", type=int, help="Port (default 8765).")
@click.option("--insecure-no-auth", is_flag=True, default=None,
              help="Allow binding a non-loopback address without an owner password.")
@pass_ctx
def serve(obj: Context, host: str | None, port: int | None, insecure_no_auth: bool | None) -> None:
    """Start the HTTP API and web UI."""
    import threading

    import uvicorn

    from ..reconcile import reconcile
    from ..retrieval.semantic import warm
    from ..server import check_bind, create_app

    obj.overrides.update({"host": host, "port": port, "insecure_no_auth": insecure_no_auth})
    settings = obj.settings
    hearth = Hearth(settings)
    check_bind(settings, hearth)
    server = uvicorn.Server(uvicorn.Config(create_app(settings, hearth), host=settings.host,
                                           port=settings.port, log_level="warning"))

    def after_start() -> None:
        # Maintenance must never delay the port (P7): wait until the server is accepting requests.
        while not server.started and not server.should_exit:
            threading.Event().wait(0.05)
        if server.started:
            result = reconcile(hearth)
            if result.failed:
                err_console.print(f"Prompt reconciliation: {result.failed} conversation(s) still failing; "
                                  "see `hearth doctor`.", markup=False)
            warm(hearth)  # vector indexes: loaded from their saved files or built, off the send path

    from ..jobs import Worker

    worker = Worker(hearth)  # summaries, live context, status detection, review, embeddings
    threading.Thread(target=after_start, name="hearth-maintenance", daemon=True).start()
    worker.start()
    err_console.print(f"Hearth is listening on http://{settings.host}:{settings.port}", markup=False)
    try:
        server.run()
    finally:
        worker.stop()
