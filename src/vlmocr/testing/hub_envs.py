"""Virtual environments that each hold one older release of huggingface_hub — the floor pyproject
names and the release before it — for the test that launches a Jobs API job with each
(tests/cluster/serve/test_hfjob_launch.py: the floor launches, the release before it is refused).

They are made by the install step, never while the tests run (an offline clone's tests find them
made), from the lines of the one package list tagged `[hub-env]`:

    python -m vlmocr.testing.hub_envs install PACKAGE_LIST   (scripts/test.sh does this)

Each environment sees the system's packages (--system-site-packages) and, through a .pth line
written each time it is asked for, the packages of the Python asking (a CI venv, a developer's):
its own huggingface_hub comes first, what that release requires and the running Python lacks
(httpx, httpcore for the 1.x releases) was installed beside it, the rest — vlmocr's dependencies
— comes from the asking Python. Kept under ``${XDG_CACHE_HOME:-~/.cache}/vlmocr/hub-env-VERSION``."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from collections.abc import Mapping
from pathlib import Path

from ..envvars import cache_home

TAG = "[hub-env]"
PACKAGE = "huggingface_hub"
STAMP = ".vlmocr-hub-env"


def hub_versions(package_list: str | os.PathLike[str]) -> list[str]:
    """The versions of the list's `huggingface_hub==V [hub-env]` lines."""
    out = []
    for line in Path(package_list).read_text(encoding="utf-8").splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) > 1 and fields[1] == TAG:
            name, _, version = fields[0].partition("==")
            if name != PACKAGE or not version:
                raise SystemExit(f"{package_list}: a {TAG} line names {fields[0]!r}, not {PACKAGE}==VERSION")
            out.append(version)
    return out


def env_dir(version: str, environ: Mapping[str, str] | None = None) -> Path:
    return cache_home(environ) / "vlmocr" / f"hub-env-{version}"


def _point_at_this_python(where: Path) -> None:
    """A venv made from inside a venv sees the base Python's packages, not the outer venv's (where
    a fresh machine keeps vlmocr's dependencies): a .pth names this Python's, after the
    environment's own."""
    (inner,) = (where / "lib").glob("python3*/site-packages")
    outer = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (inner / "vlmocr-outer-env.pth").write_text("".join(f"{path}\n" for path in outer), encoding="utf-8")


def hub_python(version: str, environ: Mapping[str, str] | None = None) -> Path | None:
    """The Python of the environment holding huggingface_hub==version, or None if it was not made."""
    where = env_dir(version, environ)
    python = where / "bin" / "python"
    if not (where / STAMP).is_file() or not python.exists():
        return None
    _point_at_this_python(where)
    return python


def install(package_list: str | os.PathLike[str], say=print) -> list[Path]:
    out = []
    for version in hub_versions(package_list):
        where = env_dir(version)
        python = where / "bin" / "python"
        if (where / STAMP).is_file() and python.exists():
            out.append(python)
            continue
        say(f"hub environments: installing {PACKAGE}=={version} into {where}")
        venv.EnvBuilder(system_site_packages=True, with_pip=True, clear=True).create(where)
        _point_at_this_python(where)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        f"{PACKAGE}=={version}"], check=True, timeout=900)
        (where / STAMP).write_text(version + "\n", encoding="utf-8")
        out.append(python)
    return out


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["install"] and len(args) == 2:
        for python in install(args[1], say=lambda m: print(m, file=sys.stderr)):
            print(python)
        return 0
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main())
