"""The house as its imports draw it, held against docs/house.json and docs/house-pages.json (what
tests/test_house.py asserts): never-rules broken, arrows undrawn or drawn and absent, files on no
part, import circles, the floors with folders as rooms and the longest chain, the longest modules.

    python scripts/house.py"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from support.house import read_house  # noqa: E402


def main() -> int:
    bad = 0
    for plan in (REPO / "docs" / "house.json", REPO / "docs" / "house-pages.json"):
        house = read_house(plan=plan)
        print(f"{plan.name}: {len(house.arrows)} arrows drawn, {len(house.never)} never-rules")
        for what, found in (("broken", house.broken_nevers()), ("undrawn", house.undrawn()),
                            ("drawn, not in the code", [f"{a} -> {b}" for a, b in house.drawn_but_absent()])):
            for line in found:
                print(f"  {what}: {line}")
            bad += len(found)
    house = read_house()
    floors, chain = house.floors()
    print(f"files on no part: {house.files_on_no_part() or 'none'}")
    print(f"circles: {house.circles() or 'none'}; of folders: {house.room_circles() or 'none'}")
    print(f"floors (folders as rooms): {floors}: {' -> '.join(chain)}")
    print("longest modules: " + ", ".join(f"{f} {n}" for f, n in sorted(house.lines.items(), key=lambda x: -x[1])[:6]))
    return 1 if bad or house.circles() or house.room_circles() else 0


if __name__ == "__main__":
    raise SystemExit(main())
