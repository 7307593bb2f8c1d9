"""Is there a display to open a window on? Asked before Qt is, because Qt's answer to "no"
is an abort (exit 134) with a message about the xcb plugin that does not tell a user what to
do. Qt-free so it runs before PySide6 is imported."""
from __future__ import annotations

import os
import socket
import sys
from typing import Mapping, Optional

#: Qt platform plugins that draw without a window system.
_HEADLESS_PLATFORMS = frozenset({"offscreen", "minimal", "minimalegl", "vnc", "eglfs", "linuxfb",
                                 "vkkhrdisplay"})

def advice(python: str = sys.executable) -> str:
    """What to run instead, naming the interpreter that is running (a bare ``python3`` is often
    the system's, outside the venv that has the Studio)."""
    return (f"run it under a virtual display: xvfb-run -a {python} -m nac_studio [FILE], or without a window: "
            f"QT_QPA_PLATFORM=offscreen {python} -m nac_studio FILE --screenshot out.png")


def missing_display(env: Optional[Mapping[str, str]] = None, platform: str = sys.platform) -> Optional[str]:
    """``None`` when Qt can open a window (or was told to draw without one); otherwise the
    reason there is no display, in words."""
    env = os.environ if env is None else env
    if not platform.startswith(("linux", "freebsd", "openbsd", "netbsd")):
        return None      # macOS and Windows always have their window system
    wanted = [p.strip().split(":")[0].lower() for p in env.get("QT_QPA_PLATFORM", "").split(";") if p.strip()]
    if any(p in _HEADLESS_PLATFORMS for p in wanted):
        return None
    if env.get("WAYLAND_DISPLAY") and (not wanted or any(p.startswith("wayland") for p in wanted)):
        return None
    if wanted and not any(p == "xcb" for p in wanted):
        return None      # some other plugin: let Qt judge it
    display = env.get("DISPLAY", "")
    if not display:
        return "no display: DISPLAY and WAYLAND_DISPLAY are not set"
    if not _x_server_answers(display):
        return f"no X server answers on DISPLAY={display}"
    return None


def _x_server_answers(display: str) -> bool:
    """Local displays (``:N``, ``unix:N``) are probed on their socket; remote ones are trusted."""
    host, _, rest = display.rpartition(":")
    if host not in ("", "unix"):
        return True
    number = rest.split(".")[0]
    if not number.isdigit():
        return True
    path = f"/tmp/.X11-unix/X{number}"
    for address in (path, "\0" + path):       # the file socket, then Linux's abstract one
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(1.0)
        try:
            s.connect(address)
            return True
        except OSError:
            continue
        finally:
            s.close()
    return False
