"""Carry the GPU box's offline files over in trips that fit one device call each (stdlib only).

``python -m lab carry pack|unpack`` (or scripts/carry_pack.sh and carry_unpack.sh). Standard library and lab's
core only: it runs on the GPU box before anything is installed there.

pack (scripts/carry_pack.sh, where the files are): the vLLM bundle (part00, part01, ... and SHA256SUMS
from shared/offline-vllm/build.sh), the FlashAttention 4 wheels and the notebook wheels
(scripts/live_wheels.sh) go into trip folders t0, t1, ... of at most --trip-mb MiB each. The files are laid
end to end and cut at each trip's limit, so the number of trips is the fewest possible; a file cut in pieces
is stored as NAME.chunk00, NAME.chunk01, ... Every trip holds the same MANIFEST.tsv: each piece (trip, path,
offset, size, sha256) and each whole file (size, sha256).

unpack (scripts/carry_unpack.sh, on the GPU box once the trip folders are there): checks that every trip
is present and every piece intact (naming what is missing), then joins the pieces into DEST/vllm-bundle/,
DEST/fa4/ and DEST/wheels/. A file already there and intact is kept, so a second run changes nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from lab import LabError
from lab.cli import path_arg

REPO = Path(__file__).resolve().parent.parent   # the defaults are folders of this checkout
MIB = 1024 * 1024
#: Room kept in each trip for its MANIFEST.tsv (a few hundred bytes per file; checked after writing).
MANIFEST_ROOM = 256 * 1024
MANIFEST = "MANIFEST.tsv"
KINDS = ("vllm-bundle", "fa4", "wheels")   # the folders a trip and DEST hold
BLOCK = 4 * MIB


class CarryError(LabError):
    """Bad input: one line, exit status 2 (as every LabError of a command)."""


@dataclass(frozen=True)
class Piece:
    trip: int
    path: str     # inside the trip folder, e.g. fa4/NAME.whl.chunk01
    dest: str     # the file it is part of, e.g. fa4/NAME.whl
    offset: int
    size: int
    sha256: str = ""


@dataclass(frozen=True)
class Whole:
    dest: str
    size: int
    sha256: str


# ---- pack ---------------------------------------------------------------------------------------------------

def bundle_files(folder: Path) -> list[Path]:
    """The vLLM bundle's SHA256SUMS and the parts it lists, each checked against it."""
    sums = folder / "SHA256SUMS"
    if not sums.is_file():
        raise CarryError(f"{folder}: no SHA256SUMS (a vLLM bundle folder from shared/offline-vllm/build.sh?)")
    try:
        text = sums.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CarryError(f"{sums}: not a checksum list (binary at byte {exc.start}); copy the bundle again") from None
    parts = []
    for line in text.splitlines():
        digest, _, name = line.partition("  ")
        if name == "bundle.tar.xz" or not name:
            continue
        part = folder / name
        if not part.is_file():
            raise CarryError(f"{part}: listed in {sums} but missing")
        if sha256_of(part) != digest:
            raise CarryError(f"{part}: does not match {sums} (copy it again)")
        parts.append(part)
    if not parts:
        raise CarryError(f"{sums}: lists no parts")
    return [*parts, sums]


def wheel_files(folder: Path, what: str) -> list[Path]:
    """The wheels in ``folder``, and wheels already carried in pieces (NAME.whl.part*)."""
    if not folder.is_dir():
        raise CarryError(f"{folder}: no such folder ({what}; or pass none to leave it out)")
    files = sorted(p for p in folder.iterdir() if p.is_file() and (p.name.endswith(".whl") or ".whl.part" in p.name))
    if not files:
        raise CarryError(f"{folder}: holds no .whl files ({what})")
    return files


def plan(files: list[tuple[str, Path]], capacity: int) -> list[Piece]:
    """Lay the files end to end and cut them into trips of ``capacity`` bytes: the pieces, in order."""
    pieces: list[Piece] = []
    trip, room = 0, capacity
    for dest, path in files:
        size, offset, own = path.stat().st_size, 0, []
        while offset < size or not own:
            if room == 0:
                trip, room = trip + 1, capacity
            n = min(room, size - offset)
            own.append((trip, offset, n))
            offset, room = offset + n, room - n
        width = max(2, len(str(len(own) - 1)))
        for index, (t, start, n) in enumerate(own):
            name = dest if len(own) == 1 else f"{dest}.chunk{index:0{width}d}"
            pieces.append(Piece(t, name, dest, start, n))
    return pieces


def manifest_text(pieces: list[Piece], wholes: list[Whole], trip_mb: float) -> str:
    trips = pieces[-1].trip + 1 if pieces else 0
    lines = [f"# scripts/carry_pack.sh: {trips} trips of at most {trip_mb:g} MiB; copy every tN folder, "
             "then scripts/carry_unpack.sh TRIPS_DIR DEST", "version\t1", f"trips\t{trips}"]
    lines += [f"file\t{w.dest}\t{w.size}\t{w.sha256}" for w in wholes]
    lines += [f"piece\t{p.trip}\t{p.path}\t{p.dest}\t{p.offset}\t{p.size}\t{p.sha256}" for p in pieces]
    return "\n".join(lines) + "\n"


def write_pieces(files: dict[str, Path], pieces: list[Piece], out: Path) -> tuple[list[Piece], list[Whole]]:
    """Copy each piece into its trip folder under ``out``, hashing pieces and whole files in one read; a write
    that fails (a full disk) is one line naming the piece."""
    done, wholes = [], []
    by_dest: dict[str, list[Piece]] = {}
    for piece in pieces:
        by_dest.setdefault(piece.dest, []).append(piece)
    for dest, own in by_dest.items():
        whole = hashlib.sha256()
        with open(files[dest], "rb") as src:
            for piece in own:
                target = out / f"t{piece.trip}" / piece.path
                digest = hashlib.sha256()
                with writing(target) as dst:
                    left = piece.size
                    while left:
                        block = src.read(min(BLOCK, left))
                        if not block:
                            raise CarryError(f"{files[dest]}: changed while being packed")
                        dst.write(block)
                        digest.update(block)
                        whole.update(block)
                        left -= len(block)
                done.append(Piece(piece.trip, piece.path, dest, piece.offset, piece.size, digest.hexdigest()))
        wholes.append(Whole(dest, sum(p.size for p in own), whole.hexdigest()))
    return done, wholes


@contextlib.contextmanager
def writing(path: Path):
    """``path`` open for writing (its folder made); an OSError, which for a full disk names no file, names it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as fh:
            yield fh
    except OSError as exc:
        raise CarryError(f"{path}: cannot write: {exc.strerror or exc}") from None


def resolved(path: Path, name: str) -> Path:
    """``path`` made absolute with its links followed; a link loop is one line naming it."""
    try:
        return path.resolve()
    except (RuntimeError, OSError):      # RuntimeError: pathlib's loop before Python 3.13
        raise CarryError(f"{name} {path}: a symbolic link that leads back to itself; fix or remove the link") from None


def is_trips(folder: Path) -> bool:
    """Whether ``folder`` holds trip folders of an earlier pack and nothing else (then it may be replaced)."""
    return all(p.is_dir() and p.name[:1] == "t" and p.name[1:].isdigit()
               for p in folder.iterdir())


def check_out(out: Path, inputs: list[Path]) -> None:
    """The trips folder is replaced as a whole: it may not be, hold or lie inside an input folder, and an existing
    one must be an earlier pack's (a file, or a folder of other files, is never replaced)."""
    for folder in inputs:
        if out == folder or out in folder.parents:
            raise CarryError(f"--out {out}: would replace the input folder {folder}; choose another")
        if folder in out.parents:
            raise CarryError(f"--out {out}: lies inside the input folder {folder}; choose another")
    if out.is_file() or out.is_symlink() and not out.exists():
        raise CarryError(f"--out {out}: is a file; the trips go into a folder of their own: choose another")
    if out.is_dir() and not is_trips(out):
        raise CarryError(f"--out {out}: holds files that are not an earlier pack's trips; choose an empty or new folder")


def pack(args: argparse.Namespace) -> int:
    if not (math.isfinite(args.trip_mb) and args.trip_mb > 2 * MANIFEST_ROOM / MIB):
        raise CarryError(f"--trip-mb {args.trip_mb:g}: a trip needs more than 0.5 MiB (room for its manifest)")
    sources = [("vllm-bundle", args.vllm, None), ("fa4", args.fa4, "FlashAttention 4 wheels"),
               ("wheels", args.wheels, "notebook wheels from scripts/live_wheels.sh")]
    sources = [(kind, resolved(folder, f"--{kind.split('-')[0]}"), what) for kind, folder, what in sources
               if str(folder) != "none"]
    if not sources:
        raise CarryError("nothing to pack: every folder was left out")
    out = resolved(args.out, "--out")
    check_out(out, [folder for _, folder, _ in sources])    # before any input is read
    files: dict[str, Path] = {}
    for kind, folder, what in sources:
        for path in bundle_files(folder) if what is None else wheel_files(folder, what):
            files[f"{kind}/{path.name}"] = path
    print(f"packing {len(files)} files ({sum(p.stat().st_size for p in files.values()) / MIB:.1f} MiB) "
          f"into trips of at most {args.trip_mb:g} MiB in {out} ...", flush=True)
    capacity = int(args.trip_mb * MIB) - MANIFEST_ROOM
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        pieces, wholes = write_pieces(files, plan(list(files.items()), capacity), partial)
        text = manifest_text(pieces, wholes, args.trip_mb)
        trips = pieces[-1].trip + 1
        for trip in range(trips):
            with writing(partial / f"t{trip}" / MANIFEST) as fh:
                fh.write(text.encode("utf-8"))
            size = sum(p.stat().st_size for p in (partial / f"t{trip}").rglob("*") if p.is_file())
            if size > args.trip_mb * MIB:
                raise CarryError(f"t{trip} came to {size / MIB:.2f} MiB, over --trip-mb {args.trip_mb:g}")
            names = sorted({p.dest for p in pieces if p.trip == trip})
            print(f"t{trip}: {size / MIB:6.1f} MiB  {', '.join(names)}", flush=True)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    old = out.with_name(out.name + ".old")   # the earlier trips stay whole until the new ones are in place
    shutil.rmtree(old, ignore_errors=True)
    if out.exists():
        out.rename(old)
    partial.rename(out)
    shutil.rmtree(old, ignore_errors=True)
    total = sum(w.size for w in wholes) / MIB
    print(f"{trips} trips, {len(wholes)} files, {total:.1f} MiB in {out}\n"
          f"copy each trip folder to the GPU box (e.g. /tmp/carry/t0 ... /tmp/carry/t{trips - 1}), then there:\n"
          f"  scripts/carry_unpack.sh /tmp/carry /tmp/offline")
    return 0


# ---- unpack -------------------------------------------------------------------------------------------------

def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(BLOCK):
            digest.update(block)
    return digest.hexdigest()


def parse_manifest(path: Path) -> tuple[int, list[Whole], list[Piece]]:
    trips, wholes, pieces = None, [], []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise CarryError(f"{path}: not a manifest (not text); copy that trip again") from None
    for number, line in enumerate(lines, 1):
        if not line or line.startswith("#"):
            continue
        kind, *fields = line.split("\t")
        try:
            if kind == "trips":
                trips = int(fields[0])
            elif kind == "file":
                wholes.append(Whole(fields[0], int(fields[1]), fields[2]))
            elif kind == "piece":
                pieces.append(Piece(int(fields[0]), fields[1], fields[2], int(fields[3]), int(fields[4]), fields[5]))
            elif kind != "version":
                raise ValueError(f"unknown kind {kind!r}")
        except (ValueError, IndexError) as exc:
            raise CarryError(f"{path}:{number}: unreadable line ({exc}); copy that trip again") from None
    if trips is None or any(not 0 <= p.trip < trips for p in pieces) or any(safe(p) is None for p in pieces):
        raise CarryError(f"{path}: malformed manifest; copy that trip again")
    return trips, wholes, pieces


def safe(piece: Piece) -> str | None:
    """The piece's paths if they stay inside a trip and inside DEST (one of KINDS/NAME), else None."""
    for rel in (piece.path, piece.dest):
        kind, _, name = rel.partition("/")
        if kind not in KINDS or not name or "/" in name or name in (".", ".."):
            return None
    return piece.path


def read_trips(trips_dir: Path) -> tuple[int, list[Whole], list[Piece]]:
    """The one manifest every trip carries, after checking that all trips are there and agree."""
    found = sorted((p for p in trips_dir.glob("t*") if p.is_dir() and p.name[1:].isdigit()),
                   key=lambda p: int(p.name[1:]))
    if not found:
        raise CarryError(f"{trips_dir}: no trip folders t0, t1, ... (copy them there first)")
    with_manifest = [p for p in found if (p / MANIFEST).is_file()]
    if not with_manifest:
        raise CarryError(f"{trips_dir}: no trip holds {MANIFEST}: copy the trips again")
    first = with_manifest[0] / MANIFEST
    text = first.read_bytes()
    for other in with_manifest[1:]:
        if (other / MANIFEST).read_bytes() != text:
            raise CarryError(f"{other / MANIFEST} differs from {first}: trips of two different packs; copy one pack's")
    trips, wholes, pieces = parse_manifest(first)
    missing = [f"t{i}" for i in range(trips) if not (trips_dir / f"t{i}" / MANIFEST).is_file()]
    if missing:
        raise CarryError(f"{trips_dir}: missing trips {', '.join(missing)} (of t0..t{trips - 1}): "
                         f"copy each to {trips_dir}/tN and run again")
    return trips, wholes, pieces


def bad_pieces(trips_dir: Path, pieces: list[Piece]) -> list[str]:
    bad = []
    for piece in pieces:
        path = trips_dir / f"t{piece.trip}" / piece.path
        if not path.is_file():
            bad.append(f"t{piece.trip}/{piece.path} (missing)")
        elif path.stat().st_size != piece.size or sha256_of(path) != piece.sha256:
            bad.append(f"t{piece.trip}/{piece.path} (corrupt)")
    return bad


def join(trips_dir: Path, whole: Whole, pieces: list[Piece], target: Path) -> None:
    """Write ``target`` from its pieces through a temporary file beside it, checked before it is moved in."""
    temp = target.with_name(f".{target.name}.{os.getpid()}.partial")
    digest = hashlib.sha256()
    try:
        with writing(temp) as dst:
            for piece in sorted(pieces, key=lambda p: p.offset):
                with open(trips_dir / f"t{piece.trip}" / piece.path, "rb") as src:
                    while block := src.read(BLOCK):
                        dst.write(block)
                        digest.update(block)
        if digest.hexdigest() != whole.sha256:
            raise CarryError(f"{whole.dest}: the joined pieces do not match the manifest (pack again)")
        os.replace(temp, target)
    finally:
        temp.unlink(missing_ok=True)


def unpack(args: argparse.Namespace) -> int:
    trips_dir, dest = resolved(args.trips_dir, "TRIPS_DIR"), resolved(args.dest, "DEST")
    if not trips_dir.is_dir():
        raise CarryError(f"TRIPS_DIR {trips_dir}: no such folder")
    trips, wholes, pieces = read_trips(trips_dir)
    for trip in range(trips):
        folder = trips_dir / f"t{trip}"
        if dest == folder or folder in dest.parents:
            raise CarryError(f"DEST {dest}: inside the trip folder {folder}; choose another")
    bad = bad_pieces(trips_dir, pieces)
    if bad:
        raise CarryError(f"{len(bad)} pieces missing or corrupt: {', '.join(bad)}: copy those trips again")
    kept = joined = 0
    for whole in wholes:
        target = dest / whole.dest
        if target.is_file() and target.stat().st_size == whole.size and sha256_of(target) == whole.sha256:
            kept += 1
            continue
        join(trips_dir, whole, [p for p in pieces if p.dest == whole.dest], target)
        joined += 1
        print(f"  {whole.dest} ({whole.size / MIB:.1f} MiB)", flush=True)
    print(f"{trips} trips checked; {joined} files joined, {kept} already there, in {dest}")
    have = [kind for kind in KINDS if any(w.dest.startswith(kind + "/") for w in wholes)]
    wheels = f" {dest}/wheels" if "wheels" in have else ""
    fa4 = f" --fa4-wheels {dest}/fa4" if "fa4" in have else ""
    if "vllm-bundle" in have:
        print(f"next: scripts/gpu_setup.sh --offline {dest}/vllm-bundle{wheels}{fa4}")
    return 0


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="carry_command", metavar="pack|unpack", required=True)
    p = sub.add_parser("pack", prog="scripts/carry_pack.sh", description=__doc__.split("\n\n")[2],
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="Then copy each trip folder to the GPU box (one device call each, e.g. to /tmp/carry/tN)\n"
                              "and run there: scripts/carry_unpack.sh /tmp/carry /tmp/offline")
    p.add_argument("--vllm", type=path_arg, default=REPO / ".carry", help="the vLLM bundle folder (default .carry)")
    p.add_argument("--fa4", type=path_arg, default=REPO / ".fa4", help="FlashAttention 4 wheels (default .fa4; none: leave out)")
    p.add_argument("--wheels", type=path_arg, default=REPO / ".wheels",
                   help="notebook wheels (default .wheels; none: leave out)")
    p.add_argument("--out", type=path_arg, default=REPO / ".trips",
                   help="the trips folder, new or an earlier pack's (replaced as a whole; default .trips)")
    p.add_argument("--trip-mb", type=float, default=os.environ.get("TRIP_MB", "46"),
                   help="MiB per trip at most (default $TRIP_MB, else 46)")
    u = sub.add_parser("unpack", prog="scripts/carry_unpack.sh", description=__doc__.split("\n\n")[3],
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="Then: scripts/gpu_setup.sh --offline DEST/vllm-bundle DEST/wheels --fa4-wheels DEST/fa4")
    u.add_argument("trips_dir", type=path_arg, metavar="TRIPS_DIR", help="the folder holding t0, t1, ...")
    u.add_argument("dest", type=path_arg, metavar="DEST", help="where vllm-bundle/, fa4/ and wheels/ go")


def main(args) -> int:
    return pack(args) if args.carry_command == "pack" else unpack(args)
