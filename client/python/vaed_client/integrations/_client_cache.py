"""One vaed Client per (process, socket) for the integrations, made on first
use: pipeline blocks and pipeline classes are copied and pickled by their
frameworks, so they hold a socket path, never a Client."""

from __future__ import annotations

import os
import threading
from typing import Dict, Optional, Tuple

from .._client import Client

_lock = threading.Lock()
_clients: Dict[Tuple[int, str], Client] = {}


def shared_client(socket: Optional[str] = None) -> Client:
    """The Client of this process for `socket` (None: $VAED_SOCKET, else
    /run/vaed/vaed.sock, as :class:`vaed_client.Client`). A forked child
    gets its own. Raises DaemonUnavailable when no daemon answers."""
    path = socket or os.environ.get("VAED_SOCKET") or ""
    key = (os.getpid(), path)
    with _lock:
        client = _clients.get(key)
        if client is None:
            client = Client(path or None, client_name="vaed-integration")
            _clients[key] = client
        return client
