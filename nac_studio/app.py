"""``nac-studio [FILE ...] [--screenshot out.png] [--select TICK] [--run-to TICK [--inspect vN]]``: start the Studio.

The event loop is qasync's: Qt's loop drives asyncio, so background work (parsing,
layout, statistics) is awaited from the UI as futures while Qt keeps painting. With no
FILE the bundled demo model opens. ``--screenshot`` waits until loading and every
background task (the graph layout included) has finished, saves the window as a PNG and
exits; it works under ``QT_QPA_PLATFORM=offscreen`` and ``xvfb-run``.
"""
from __future__ import annotations

import argparse
import asyncio
import faulthandler
import importlib.resources
import sys
from pathlib import Path
from typing import Optional

#: The bundled demo models: package data, found through importlib.resources (a wheel ships them).
MODELS = Path(str(importlib.resources.files("nac_studio").joinpath("demos")))
#: Preference among bundled demos: compiled real models first, the hand-built MLP last.
_DEMO_PREFERENCE = ("bert", "gpt", "cnn", "resnet", "mlp")


def demo_model(models_dir: Path = MODELS) -> Optional[Path]:
    """The bundled model to open when no file is given (``None`` if there is none)."""
    files = sorted(models_dir.glob("*.nac")) if models_dir.is_dir() else []
    if not files:
        return None

    def rank(p: Path):
        name = p.stem.lower()
        handmade = name == "demo_mlp"
        pref = next((i for i, key in enumerate(_DEMO_PREFERENCE) if key in name), len(_DEMO_PREFERENCE))
        return (handmade, pref, name)
    return min(files, key=rank)


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="nac-studio", description="NAC Studio: look inside compiled networks.")
    ap.add_argument("files", nargs="*", metavar="FILE", help=".nac files to open (default: the bundled demo)")
    ap.add_argument("--screenshot", metavar="PNG", help="save the window to PNG after loading, then exit")
    ap.add_argument("--select", metavar="TICK", type=int, help="select this instruction after loading")
    ap.add_argument("--run-to", metavar="TICK", type=int, dest="run_to",
                    help="run the debugger to this tick (inputs: the file's signature, remembered choices or --input)")
    ap.add_argument("--inspect", metavar="vN", help="with --run-to: pin an inspector on tick N's result")
    ap.add_argument("--input", metavar="NAME=FILE.npy", action="append", default=[],
                    help="with --run-to: the value of an input (repeatable)")
    ap.add_argument("--dock", metavar="NAME", help="raise this pane after loading and fill it (timeline: the "
                                                   "MMAP timeline; hardware: a simulation on its default preset)")
    ap.add_argument("--theme", choices=("system", "light", "dark"), default=None,
                    help="colour scheme (default: follow the system, or the last choice)")
    ap.add_argument("--size", metavar="WxH", default=None, help="window size, e.g. 1600x1000")
    ap.add_argument("--reset-layout", action="store_true", help="ignore the saved window layout")
    ap.add_argument("--timeout", type=float, default=120.0, help="--screenshot: give up waiting after this many s")
    return ap.parse_args(argv)


async def _startup(win, args, app) -> int:
    """Open the files, then (for --select/--screenshot) wait for the background work."""
    files = list(args.files)
    if not files:
        demo = demo_model()
        if demo is not None:
            files = [str(demo)]
    for f in files:
        win.open_path(f)
    if args.select is None and args.run_to is None and not args.screenshot and not args.dock:
        return 0
    ok = await win.wait_idle(timeout=args.timeout)
    if args.select is not None and win.active is not None:
        from .model.document import Selection
        n = len(win.active.nac.instructions)
        if 0 <= args.select < n:
            win.active.select(Selection("instruction", args.select))
        else:
            print(f"nac-studio: --select {args.select}: the file has ticks 0..{n - 1}", file=sys.stderr)
        ok = await win.wait_idle(timeout=args.timeout) and ok
    # the pane first: the stop then brings the execution point into view in the final layout
    if args.dock and win.active is not None:
        from .simulation_commands import show_dock_for_cli
        if not await show_dock_for_cli(win, args.dock, timeout=args.timeout):
            return 1
        ok = await win.wait_idle(timeout=args.timeout) and ok
    if args.run_to is not None and win.active is not None:
        from .debug_commands import run_to_from_cli
        if not await run_to_from_cli(win, args.run_to, args.inspect, args.input, timeout=args.timeout):
            return 1
        if args.dock:       # the stop raised the debugger's panes: the one asked for stays in front
            win.docks[args.dock].raise_()
        ok = await win.wait_idle(timeout=args.timeout) and ok
    if not args.screenshot:
        return 0
    if not ok:
        print(f"nac-studio: background work still running after {args.timeout:.0f} s; saving anyway",
              file=sys.stderr)
    await asyncio.sleep(0.05)
    app.processEvents()
    pixmap = win.grab()
    out = Path(args.screenshot)
    out.parent.mkdir(parents=True, exist_ok=True)
    from .widgets.image_files import write_png
    try:
        write_png(pixmap, str(out))
    except OSError as e:
        print(f"nac-studio: could not write {out}: {e.strerror or e}", file=sys.stderr)
        return 1
    print(f"nac-studio: saved {out} ({pixmap.width()}x{pixmap.height()})")
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(argv)
    # a crash inside Qt or an extension prints the Python stack of every thread to stderr, so a
    # user's report (and a failing test's log) says where it happened
    if sys.stderr is not None and not faulthandler.is_enabled():
        try:
            faulthandler.enable()
        except (AttributeError, ValueError, OSError):   # no usable file descriptor behind stderr
            pass
    from .display_check import advice, missing_display
    no_display = missing_display()
    if no_display is not None:
        print(f"nac-studio: {no_display}; {advice()}", file=sys.stderr)
        return 2
    from .qt_compat import guard_singleton_refcounts
    guard_singleton_refcounts()
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication
    import qasync

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("NAC Studio")
    app.setOrganizationName("NAC Studio")
    app.setApplicationDisplayName("NAC Studio")
    from .main_window import MainWindow
    from .theme import apply_theme

    screenshot = bool(args.screenshot)
    settings = QSettings("NAC Studio", "NAC Studio")
    theme = args.theme or (settings.value("theme", "system", type=str) if not screenshot else "system")
    apply_theme(app, theme)
    # A screenshot is a reproducible picture of the default layout: no saved state in, none out.
    win = MainWindow(settings, restore=not (screenshot or args.reset_layout), persist=not screenshot, theme=theme,
                     fit_screen=not screenshot)
    if args.size:
        try:
            w, h = (int(x) for x in args.size.lower().split("x"))
            win.resize(w, h)
            win.apply_default_layout()
        except ValueError:
            print(f"nac-studio: --size {args.size!r} is not WxH", file=sys.stderr)
    win.show()
    # the engine host starts now and imports torch in its own process while the window answers
    win.host.request("nac/warmUp", title="Starting the engine", track=False)

    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    result = {"code": 0}
    quit_event = asyncio.Event()
    app.aboutToQuit.connect(quit_event.set)

    async def run() -> None:
        try:
            result["code"] = await _startup(win, args, app)
        except Exception as exc:   # startup must never leave a half-open window behind silently
            print(f"nac-studio: {exc}", file=sys.stderr)
            result["code"] = 1
            if screenshot:
                raise
        if screenshot:
            win.close()
            app.quit()
            return
        await quit_event.wait()

    with loop:
        try:
            loop.run_until_complete(run())
        except Exception:
            result["code"] = result["code"] or 1
    win.tasks.shutdown(wait=False)
    win.host.shutdown()
    _destroy_before_app(win, app)
    return result["code"]


def _destroy_before_app(win, app) -> None:
    """Delete the window's C++ objects now, while the QApplication still exists. Left to the
    interpreter's teardown, the order in which ``main``'s locals and the modules' globals are
    freed is not fixed, and a widget destroyed after its QApplication can crash the process
    after everything the user asked for (a saved screenshot included) has been done."""
    import shiboken6
    if shiboken6.isValid(win):
        shiboken6.delete(win)
    app.processEvents()


if __name__ == "__main__":
    sys.exit(main())
