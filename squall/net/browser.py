"""Locating and starting the headless Chromium that renders pages (and that browser tests drive).

No browser is ever downloaded: squall uses the system's Chromium (Debian's
``chromium`` package; ``scripts/install-browser.sh`` installs it) through
Playwright's ``executable_path``. :func:`find_chromium` is the one place that
knows where to look; :data:`CHROMIUM_ARGS` are the flags every launch uses.

Why these flags (each keeps the browser from opening connections of its own):

* ``--disable-background-networking``, ``--disable-component-update``,
  ``--disable-sync``, ``--no-first-run``: no update checks, field trials,
  safe-browsing lists or sign-in traffic to Google hosts.
* ``--disable-quic``: no UDP HTTP/3 attempts.
* ``--proxy-server=http://127.0.0.1:9`` with ``--proxy-bypass-list=<-loopback>``:
  every connection Chromium would open itself (a preconnect, a request
  Playwright's interception did not see) goes to the closed discard port of
  loopback and fails there, so nothing leaves the machine behind squall's back.
  Requests squall serves (``route.fulfill``) never use the network stack.
* ``--host-resolver-rules=MAP * ~NOTFOUND``: Chromium resolves no name (no DNS
  prefetch; squall resolves and pins addresses itself).
* ``--force-webrtc-ip-handling-policy=disable_non_proxied_udp``: no WebRTC UDP.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from squall.errors import BrowserMissing

__all__ = ["CANDIDATES", "CHROMIUM_ARGS", "INSTALL_HINT", "find_chromium"]

# Executable names tried on PATH, in order (Debian: chromium; Ubuntu snaps and others: the rest).
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL_HINT = "install it with scripts/install-browser.sh (apt-get install chromium) or set render.browser.path"

CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--mute-audio",
    "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
)


def find_chromium(explicit: str | os.PathLike[str] = "", path: str | None = None) -> Path:
    """The Chromium executable to launch.

    ``explicit`` (``render.browser.path``; "" = search) must be an executable
    file when given. Otherwise the names of :data:`CANDIDATES` are looked up
    on ``path`` (default ``$PATH``), then ``/usr/bin/chromium``.

    Raises:
        BrowserMissing: nothing executable was found; the message says how to install it.
    """
    if str(explicit):
        candidate = Path(explicit)
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
        raise BrowserMissing(f"chromium not found at {candidate} (render.browser.path); {INSTALL_HINT}")
    for name in CANDIDATES:
        found = shutil.which(name, path=path)
        if found:
            return Path(found)
    fallback = Path("/usr/bin/chromium")
    if path is None and fallback.is_file() and os.access(fallback, os.X_OK):
        return fallback
    raise BrowserMissing(f"chromium not found (looked for {', '.join(CANDIDATES)} on PATH); {INSTALL_HINT}")
