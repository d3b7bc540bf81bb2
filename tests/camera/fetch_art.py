"""Fetch real card artwork from the npm registry and turn it into 52 face images per deck.

Nobody here drew these cards: they come from two published npm packages,

* ``svg-cards`` (LGPL, ships PNG renderings; we use ``png/2x``), and
* ``@younestouati/playing-cards-standard-deck`` (SVG; rasterised with cairosvg).

Each deck lands in ``<cache>/<deck>/<rank><suit>.png`` (``As.png``, ``Th.png``...), the
layout ``baccarat-edge camera calibrate --faces`` expects. The cache defaults to
``<repo>/.cache/card-art`` (gitignored) and can be moved with ``BACCARAT_CARD_ART``.
A complete cache is reused without touching the network.

Run directly to populate the cache: ``.venv/bin/python -m tests.camera.fetch_art``.
"""

from __future__ import annotations

import fcntl
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from common.cards import ALL_CARDS, Card, Rank, Suit

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CACHE = REPO_ROOT / ".cache" / "card-art"

SVG_CARDS_PACKAGE = "svg-cards@4.0.2"
YOUNESTOUATI_PACKAGE = "@younestouati/playing-cards-standard-deck@3.0.0"
FACE_HEIGHT = 489
"""Height in pixels of every extracted face (svg-cards' own 2x PNG height)."""

DECKS = ("svg-cards", "younestouati")


class ArtFetchError(RuntimeError):
    """The card art could not be fetched or unpacked; the message says what to fix."""


def cache_dir() -> Path:
    """Where decks are cached (``BACCARAT_CARD_ART`` or ``.cache/card-art``)."""
    override = os.environ.get("BACCARAT_CARD_ART")
    return Path(override) if override else DEFAULT_CACHE


def face_name(card: Card) -> str:
    """File name of a face image, e.g. ``Th.png``."""
    return f"{card.code}.png"


def _svg_cards_member(card: Card) -> str:
    suit = {Suit.CLUBS: "club", Suit.DIAMONDS: "diamond", Suit.HEARTS: "heart", Suit.SPADES: "spade"}
    rank = {Rank.JACK: "jack", Rank.QUEEN: "queen", Rank.KING: "king"}.get(card.rank, str(int(card.rank)))
    return f"package/png/2x/{suit[card.suit]}_{rank}.png"


def _younestouati_member(card: Card) -> str:
    return f"package/cards/{int(card.rank)}{card.suit.value}.svg"


def _npm_pack(spec: str, workdir: Path) -> Path:
    npm = shutil.which("npm")
    if npm is None:
        raise ArtFetchError(
            "npm is not installed: the camera tests fetch real card art with `npm pack "
            f"{spec}`. Install Node.js/npm (e.g. `apt-get install npm`) or pre-fill "
            f"{cache_dir()} with 52 <rank><suit>.png faces per deck."
        )
    try:
        done = subprocess.run(
            [npm, "pack", spec, "--silent", "--pack-destination", str(workdir)],
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ArtFetchError(f"`npm pack {spec}` did not finish within 300 s") from exc
    if done.returncode != 0:
        raise ArtFetchError(f"`npm pack {spec}` failed (exit {done.returncode}): {done.stderr.strip()}")
    tarballs = sorted(workdir.glob("*.tgz"))
    if len(tarballs) != 1:
        raise ArtFetchError(f"`npm pack {spec}` produced {len(tarballs)} tarballs, expected 1")
    return tarballs[0]


def _extract(
    tarball: Path, member_for: Callable[[Card], str], convert: Callable[[bytes], bytes], out: Path
) -> None:
    tmp_out = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp_out, ignore_errors=True)
    tmp_out.mkdir(parents=True)
    with tarfile.open(tarball, "r:gz") as archive:
        for card in ALL_CARDS:
            name = member_for(card)
            try:
                member = archive.extractfile(name)
            except KeyError as exc:
                raise ArtFetchError(f"{tarball.name}: expected member {name!r} is missing") from exc
            if member is None:
                raise ArtFetchError(f"{tarball.name}: member {name!r} is not a regular file")
            (tmp_out / face_name(card)).write_bytes(convert(member.read()))
    shutil.rmtree(out, ignore_errors=True)
    tmp_out.rename(out)


def _png_as_is(data: bytes) -> bytes:
    return data


def _svg_to_png(data: bytes) -> bytes:
    import cairosvg

    buffer = io.BytesIO()
    cairosvg.svg2png(bytestring=data, write_to=buffer, output_height=FACE_HEIGHT)
    return buffer.getvalue()


def deck_complete(folder: Path) -> bool:
    """True when ``folder`` holds all 52 face images."""
    return all((folder / face_name(card)).is_file() for card in ALL_CARDS)


def ensure_decks(root: Path | None = None) -> dict[str, Path]:
    """Return ``{deck name: folder of 52 faces}``, fetching whatever is missing."""
    root = root or cache_dir()
    sources: dict[str, tuple[str, Callable[[Card], str], Callable[[bytes], bytes]]] = {
        "svg-cards": (SVG_CARDS_PACKAGE, _svg_cards_member, _png_as_is),
        "younestouati": (YOUNESTOUATI_PACKAGE, _younestouati_member, _svg_to_png),
    }
    folders: dict[str, Path] = {}
    for deck, (spec, member_for, convert) in sources.items():
        folder = root / deck
        if not deck_complete(folder):
            root.mkdir(parents=True, exist_ok=True)
            with (root / ".lock").open("w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # another test worker may be fetching the same deck
                if not deck_complete(folder):
                    with tempfile.TemporaryDirectory(dir=root) as work:
                        tarball = _npm_pack(spec, Path(work))
                        _extract(tarball, member_for, convert, folder)
        folders[deck] = folder
    return folders


if __name__ == "__main__":
    for deck_name, path in ensure_decks().items():
        print(f"{deck_name}: {path}")
    sys.exit(0)
