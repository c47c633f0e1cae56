"""A real Tesseract with only some of its installed language data: a folder of links to the
installed files, named by TESSDATA_PREFIX (the configuration of a machine without the rest)."""

from __future__ import annotations

from pathlib import Path


def only_data(folder: Path, *langs: str) -> dict[str, str]:
    """The environment of a Tesseract that has these languages' data only."""
    from vlmocr.engines.languages import tessdata_folder

    folder.mkdir(parents=True, exist_ok=True)
    installed = Path(tessdata_folder())
    for name in [f"{lang}.traineddata" for lang in langs] + ["configs"]:  # configs: its output formats
        (folder / name).symlink_to(installed / name)
    return {"TESSDATA_PREFIX": str(folder)}
