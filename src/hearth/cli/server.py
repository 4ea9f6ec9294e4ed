"""hearth serve: the HTTP API and web UI, with background work started once the port is open."""

from __future__ import annotations

import click

from ..errors import HearthError
from .base import Context, cli, err_console, pass_ctx


# -- server ---------------------------------------------------------------------------------------
def check_port_free(host: str, port: int) -> None:
    """Refuse early, in one line, when something already listens on the port."""
    import errno
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # The same option uvicorn sets, so a port in TIME_WAIT is not reported as busy.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise HearthError(f"port {port} is in use (another Hearth?) - use --port") from None
            raise HearthError(f"cannot listen on {host}:{port}: {exc.strerror}") from None


@cli.command()
@click.option("--host", help="Address to bind (default 127.0.0.1).")
@click.option("--port", type=int, help="Port (default 8765).")
@click.option("--insecure-no-auth", is_flag=True, default=None,
              help="Allow binding a non-loopback address without an owner password.")
@pass_ctx
def serve(obj: Context, host: str | None, port: int | None, insecure_no_auth: bool | None) -> None:
    """Start the HTTP API and web UI."""
    import threading

    import uvicorn  # present once the server package imported (it checks for the extra)

    from hearth.prompt.reconcile import reconcile

    from ..retrieval.semantic import warm
    from ..server import check_bind, create_app, vendor

    obj.overrides.update({"host": host, "port": port, "insecure_no_auth": insecure_no_auth})
    settings = obj.settings
    check_port_free(settings.host, settings.port)
    from hearth.scope import Hearth

    hearth = Hearth(settings)
    check_bind(settings, hearth)
    folder = vendor.vendor_dir(settings)
    if vendor.missing(folder):
        err_console.print(f"Warning: {vendor.missing_message(folder)}", markup=False)
    # uvicorn believes X-Forwarded-For from loopback by default; Hearth only from configured proxies.
    trusted = settings.trusted_proxies.strip()
    server = uvicorn.Server(uvicorn.Config(create_app(settings, hearth), host=settings.host,
                                           port=settings.port, log_level="warning",
                                           proxy_headers=bool(trusted), forwarded_allow_ips=trusted or None))

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

    from hearth.ops.jobs import Worker
    from hearth.outreach import activations
    from hearth.outreach.channels import mail

    worker = Worker(hearth)  # summaries, live context, status detection, review, embeddings
    mail.schedule(hearth)  # the mailbox poll, when email is configured (E10)
    activations.schedule_all(hearth.store)  # the companion's own schedules (E11)
    threading.Thread(target=after_start, name="hearth-maintenance", daemon=True).start()
    worker.start()
    from .timeline import describe

    # E4: pick up the most recently active open conversation, its capsule and open span.
    err_console.print(describe(hearth.resume()), markup=False)
    err_console.print(f"Hearth is listening on http://{settings.host}:{settings.port}", markup=False)
    try:
        server.run()
    finally:
        worker.stop()


# -- MCP over stdio (X2) ----------------------------------------------------------------------------
@cli.command("mcp")
@click.option("--token", envvar="HEARTH_TOKEN", help="Act as this API token's user (instead of --user).")
@pass_ctx
def mcp(obj: Context, token: str | None) -> None:
    """Serve Hearth's memory to an MCP client (Claude Desktop, an IDE agent) over stdio."""
    from ..errors import AuthError, ConfigError
    from ..extras import require

    require("mcp", "server", "hearth mcp")
    import anyio

    from hearth.mcp.tools import build, fixed_user

    hearth = obj.hearth
    if token:
        if obj.user:
            raise ConfigError("choose --user or --token, not both")
        user_id = hearth.users.token_user(token.strip())
        if user_id is None:
            raise AuthError("invalid or revoked API token")
    else:
        user_id = obj.scope().user_id
    server = build(hearth, fixed_user(hearth, user_id))
    anyio.run(server.run_stdio_async)
