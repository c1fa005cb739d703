"""MkDocs hook: component READMEs that live beside their code (player/README.md, rtp/README.md) are
pages of the site without being copied into docs/ (one source, edited where the code is)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parent.parent
COMPONENT_PAGES = {"components/player.md": REPO / "player" / "README.md",
                   "components/rtp.md": REPO / "rtp" / "README.md"}


def on_files(files: Files, config: Any) -> Files:
    for uri, source in COMPONENT_PAGES.items():
        files.append(File.generated(config, uri, abs_src_path=str(source)))
    return files
