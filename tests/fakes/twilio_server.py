"""A local stand-in for Twilio's REST API, speaking its wire format for messages and calls.

``POST /2010-04-01/Accounts/{AccountSid}/Messages.json`` with a form body (To, From, Body) and
HTTP basic auth answers 201 with a Message resource in JSON, as Twilio does; ``Calls.json`` (To,
From, Url) answers with a Call resource. It records every
request and can be told to fail the next requests with a status, to exercise retries.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

_RESOURCE = re.compile(r"^/2010-04-01/Accounts/(AC[0-9a-zA-Z]+)/(Messages|Calls)\.json$")


@dataclass
class FakeTwilio:
    account_sid: str
    auth_token: str
    sent: list[dict[str, str]] = field(default_factory=list)
    calls: list[dict[str, str]] = field(default_factory=list)
    fail_next: list[int] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "FakeTwilio":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _answer(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                match = _RESOURCE.match(self.path)
                expected = "Basic " + base64.b64encode(f"{fake.account_sid}:{fake.auth_token}".encode()).decode()
                if match is None:
                    return self._answer(404, {"code": 20404, "message": "Not found", "status": 404})
                if self.headers.get("Authorization") != expected or match.group(1) != fake.account_sid:
                    return self._answer(401, {"code": 20003, "message": "Authenticate", "status": 401})
                if fake.fail_next:
                    status = fake.fail_next.pop(0)
                    return self._answer(status, {"code": 20429 if status == 429 else 20500,
                                                 "message": "Try again", "status": status})
                length = int(self.headers.get("Content-Length", "0"))
                form = {k: v[-1] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                if match.group(2) == "Calls":
                    fake.calls.append(form)
                    return self._answer(201, {"sid": f"CA{len(fake.calls):032d}", "account_sid": fake.account_sid,
                                              "to": form.get("To"), "from": form.get("From"), "status": "queued",
                                              "direction": "outbound-api", "api_version": "2010-04-01"})
                sid = f"SM{len(fake.sent) + 1:032d}"
                fake.sent.append(form)
                self._answer(201, {
                    "sid": sid, "account_sid": fake.account_sid, "to": form.get("To"), "from": form.get("From"),
                    "body": form.get("Body"), "status": "queued", "direction": "outbound-api",
                    "num_segments": str(max(1, (len(form.get("Body", "")) + 152) // 153)),
                    "api_version": "2010-04-01", "date_created": "Tue, 01 Dec 2026 08:00:00 +0000",
                    "uri": f"/2010-04-01/Accounts/{fake.account_sid}/Messages/{sid}.json",
                })

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
