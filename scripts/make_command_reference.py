"""Write docs/commands.md from the commands' own --help (vlmocr/cli/reference.py)."""

from pathlib import Path

from vlmocr.cli.reference import command_reference

path = Path(__file__).resolve().parents[1] / "docs" / "commands.md"
path.write_text(command_reference(), encoding="utf-8")
print(f"wrote {path}")
