"""A real Tesseract with only some of its installed language data: a folder of links to the
installed files, named by TESSDATA_PREFIX (the configuration of a machine without the rest); what
the tests of a document's language need (the data present, a manifest with languages)."""

from __future__ import annotations

from pathlib import Path


def only_data(folder: Path, *langs: str) -> dict[str, str]:
    """The environment of a Tesseract that has these languages' data only."""
    from vlmocr.languages import tessdata_folder

    folder.mkdir(parents=True, exist_ok=True)
    installed = Path(tessdata_folder())
    for name in [f"{lang}.traineddata" for lang in langs] + ["configs"]:  # configs: its output formats
        (folder / name).symlink_to(installed / name)
    return {"TESSDATA_PREFIX": str(folder)}


def need_tesseract(*langs: str) -> None:
    """Tesseract with these languages' data, or the test cannot run (a failure in strict mode)."""
    import shutil

    from support.components import need
    from vlmocr.engines.choice import data_languages
    from vlmocr.languages import debian_package

    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    have = data_languages() or frozenset()
    for lang in langs:
        need(lang in have, f"tesseract language data {lang}", debian_package(lang) or f"tesseract-ocr-{lang}")


def write_manifest(path: Path, rows: dict[str, tuple[Path, str]]) -> Path:
    """A manifest CSV with a language per document: {doc_id: (path, language)}."""
    path.write_text("doc_id,path,language\n" + "".join(f"{d},{p},{lang}\n" for d, (p, lang) in rows.items()),
                    encoding="utf-8")
    return path
