"""One error tree for the whole library.

    HearthError                      every error Hearth raises on purpose
    ├── ConfigError                  invalid settings (CLI exit 2)
    ├── StoreError                   the database cannot be used as asked (HTTP 503)
    │   ├── StoreBusy                another writer holds the database too long (HTTP 503)
    │   └── SchemaError              the file is from a newer Hearth, or damaged
    ├── ConstraintError              a write broke a unique, reference or check rule of the schema
    ├── InvalidInput                 a value that is wrongly typed, out of range or too long (HTTP 422)
    │   └── TooLarge                 a request body or uploaded file over its size limit (HTTP 413)
    ├── NotFound                     unknown id, or an id that belongs to another user (HTTP 404)
    ├── Conflict                     valid request that clashes with current state (HTTP 409)
    ├── AuthError                    not logged in, bad password or token (HTTP 401)
    │   ├── Forbidden                logged in but not allowed, e.g. CSRF (HTTP 403)
    │   └── RateLimited              too many attempts (HTTP 429)
    ├── ProviderError                a model provider failed (HTTP 502); carries a clear reason
    └── DispatchRefused              final assembly refused to send a request (HTTP 500)

HTTP 400 is kept for requests that cannot be parsed at all (malformed JSON, a body that is not
UTF-8, a bad Content-Length); anything parsed but invalid, a too-long field included, is 422.
The CLI prints ``str(error)`` as one line (exit code 2 for ``ConfigError``, ``InvalidInput`` and ``SchemaError``); the server maps each class to a status in one table
(``hearth.server.errors``). A foreign id is reported exactly like an unknown one so that nobody
can probe for another user's data.
"""

from __future__ import annotations


class HearthError(Exception):
    """Base of every error Hearth raises on purpose."""

    code = "error"


class ConfigError(HearthError):
    code = "invalid_settings"


class StoreError(HearthError):
    code = "store_error"


class StoreBusy(StoreError):
    code = "store_busy"


class SchemaError(StoreError):
    code = "schema_error"


class ConstraintError(HearthError):
    """A write broke a rule of the schema: mostly a duplicate of a unique key, which code that
    expects one (a concurrent insert of the same name) catches. Either engine raises it (the store
    translates its driver's error). One that escapes is a bug, so it stays an HTTP 500."""

    code = "constraint_violated"


class InvalidInput(HearthError):
    code = "invalid_input"


class TooLarge(InvalidInput):
    code = "too_large"


class UnknownModel(InvalidInput):
    """A model name the provider does not offer (its model list is known): HTTP 400."""

    code = "unknown_model"


class NotFound(HearthError):
    code = "not_found"


class Conflict(HearthError):
    code = "conflict"


class AuthError(HearthError):
    code = "unauthorized"


class Forbidden(AuthError):
    code = "forbidden"


class RateLimited(AuthError):
    code = "rate_limited"

    def __init__(self, message: str, retry_after: int | None = None):
        super().__init__(message)
        self.retry_after = retry_after  # seconds, for the Retry-After header


class ProviderError(HearthError):
    """A provider failed. ``kind`` is one of: auth, rate_limit, server, timeout, stream, bad_request."""

    code = "provider_error"

    def __init__(self, message: str, kind: str = "server", retryable: bool = True):
        super().__init__(message)
        self.kind = kind
        self.retryable = retryable


class DispatchRefused(HearthError):
    code = "dispatch_refused"
