"""The hostile-input slice CI prints: special files, files truncated while open, peer-format mutants.

Each campaign counts its outcomes and fails on any contract break (anything but a result or the
one error type, a hang, a crash). The NAC mutation fuzz (tests/format/test_fuzz.py) is the
fourth part of the slice and runs inside pytest.

    python scripts/fuzz_slice.py [--peer-mutants N] [--truncations N]

Prints one line per campaign and ``contract held`` or ``CONTRACT BROKEN: ...`` last.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import textwrap
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CORPUS = ROOT.parent / "shared" / "corpus"

from nac_engine import NacFormatError, read  # noqa: E402
from nac_engine.cli import main as nac_main  # noqa: E402

SPECIAL_NAMES = ("model.nac", "model.neff", "model.hwx", "model.ir", "model.tvmr", "model.safetensors")
CLI_COMMANDS = ("info", "verify", "dis", "span")


def special_files(tmp: Path) -> Counter:
    """Every kind of non-regular path, under every extension, through the readers and the CLI:
    refused at once (a FIFO opened for reading would block the process forever)."""
    out: Counter = Counter()
    targets = {"fifo": None, "char device": "/dev/zero", "directory": str(tmp)}
    for kind, target in targets.items():
        for name in SPECIAL_NAMES:
            path = tmp / f"{kind.replace(' ', '_')}_{name}"
            if target is None:
                os.mkfifo(path)
            else:
                path.symlink_to(target)
            try:
                read(path)
                out["BROKEN: read accepted " + kind] += 1
            except NacFormatError:
                out["refused"] += 1
            for command in CLI_COMMANDS:
                args = [command, str(path)] + (["0"] if command == "span" else [])
                code = _quiet(nac_main, args)
                out["refused" if code == 2 else f"BROKEN: {command} exit {code} on {kind}"] += 1
    return out


def _quiet(fn, args) -> int:
    import contextlib
    import io
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            return fn(args)
        except SystemExit as e:
            return int(e.code or 0)


_TRUNCATE_CHILD = textwrap.dedent("""
    import json, os, sys
    from nac_engine import NacFormatError, read, write
    from nac_engine.format import reader
    reader.WHOLE_READ_MAX = 0           # mapped: the case truncation could break
    out = {}
    for path, cut in json.loads(sys.argv[1]):
        try:
            nac = read(path, strict=False)
        except NacFormatError:
            out["refused at open"] = out.get("refused at open", 0) + 1
            continue
        os.truncate(path, cut)
        touched = 0
        for fn in [lambda: write(nac), lambda: nac.buffer[0:len(nac.buffer)]] + \\
                  [lambda p=p: p.raw() for p in nac.params.values() if p.meta is not None] + \\
                  [lambda r=r: r.data for r in nac.rsrc or ()] + [lambda a=a: a.data for a in nac.arrs or ()]:
            try:
                fn()
                touched += 1
            except NacFormatError:
                out["changed-on-disk errors"] = out.get("changed-on-disk errors", 0) + 1
        out["touched after truncation"] = out.get("touched after truncation", 0) + touched
        out["files"] = out.get("files", 0) + 1
        nac.close()
    print(json.dumps(out))
""")


def truncated_while_open(tmp: Path, count: int, rnd: random.Random) -> Counter:
    """Corpus files opened mapped, truncated by "another program" to a random length, then
    saved, viewed and their weights/resources read: in a child process, where a SIGBUS shows as a
    signal exit instead of killing this one."""
    files = sorted((CORPUS / "nac").glob("*/*.nac"))
    jobs = []
    for i in range(count):
        src = rnd.choice(files)
        path = tmp / f"trunc_{i}.nac"
        data = src.read_bytes()
        path.write_bytes(data)
        jobs.append((str(path), rnd.randrange(len(data))))
    r = subprocess.run([sys.executable, "-c", _TRUNCATE_CHILD, json.dumps(jobs)], capture_output=True, text=True,
                       timeout=600, cwd=ROOT)
    if r.returncode != 0:
        return Counter({f"BROKEN: child exit {r.returncode}: {r.stderr.strip().splitlines()[-1:]}": 1})
    return Counter(json.loads(r.stdout))


def peer_mutants(count: int, rnd: random.Random) -> Counter:
    """Byte mutants of the peer corpus through decode, verify and the text form."""
    from nac_engine.peers import detect, open_peer
    seeds = [p for p in sorted((CORPUS / "peers").rglob("*")) if p.is_file() and p.suffix not in (".md", ".yaml")]
    out: Counter = Counter()
    with tempfile.TemporaryDirectory() as d:
        for i in range(count):
            src = rnd.choice(seeds)
            data = bytearray(src.read_bytes())
            for _ in range(rnd.randint(1, 8)):
                if not data:
                    break
                at = rnd.randrange(len(data))
                op = rnd.random()
                if op < 0.5:
                    data[at] = rnd.randrange(256)
                elif op < 0.75:
                    del data[at:at + rnd.randint(1, 64)]
                else:
                    data[at:at] = rnd.randbytes(rnd.randint(1, 16))
            path = Path(d) / f"m{i}{src.suffix}"
            path.write_bytes(bytes(data))
            fmt = detect(bytes(data[:4096]), str(path))
            try:
                peer = open_peer(str(path), fmt if fmt and fmt != "nac" else None)
                peer.verify()
                peer.disassemble()
                out["decoded"] += 1
            except NacFormatError:
                out["refused"] += 1
            except Exception as e:       # the contract: a result or the one error type
                out[f"BROKEN: {type(e).__name__}: {str(e)[:80]} ({src.name})"] += 1
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peer-mutants", type=int, default=20_000)
    ap.add_argument("--truncations", type=int, default=1_000)
    ap.add_argument("--seed", type=int, default=0x51CE)
    args = ap.parse_args(argv)
    if not CORPUS.is_dir():
        print("the shared corpus is not here: nothing to fuzz")
        return 0
    rnd = random.Random(args.seed)
    broken = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "special").mkdir()
        for name, counts in (("special files", special_files(tmp / "special")),
                             ("truncated while open", truncated_while_open(tmp, args.truncations, rnd)),
                             ("peer-format mutants", peer_mutants(args.peer_mutants, rnd))):
            print(f"fuzz slice: {name}: " + ", ".join(f"{k} {v:,}" for k, v in sorted(counts.items())))
            broken += [f"{name}: {k}" for k in counts if k.startswith("BROKEN")]
    print("contract held" if not broken else "CONTRACT BROKEN: " + "; ".join(broken))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
