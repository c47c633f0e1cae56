"""Identity: DOI, arXiv id and ISBN with evidence, never from the reference list; the Crossref
lookup against a real HTTP server on loopback (aiohttp), never the internet."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from support.cli import run_cli, textlayer_run
from support.documents import body_lines, make_text_pdf
from vlmocr.library.catalog import Catalog
from vlmocr.library.identify import Crossref, LookupError_, find_identifiers, isbn10_ok, isbn13_ok, normalise_isbn


def kinds(pages, **kw):
    return [(i.type, i.value, i.page) for i in find_identifiers(pages, **kw)]


def test_doi_arxiv_isbn_with_evidence():
    page1 = ("Journal of Rivers 12 (2020) 1-20\nhttps://doi.org/10.5555/Rivers.2020.001.\n"
             "Preprint: arXiv:2003.01234v2 [physics.geo-ph], also arxiv.org/abs/hep-th/9901001\n"
             "(see doi:10.1002/(SICI)1097-4571(199806)49:8<693::AID-ASI4>3.0.CO;2-0)")
    page2 = "Copyright page. ISBN 0-306-40615-2 (paperback); ISBN-13: 978-3-16-148410-0\nalso 978-0-306-40615-7"
    found = find_identifiers([(1, page1), (2, page2)])
    got = [(i.type, i.value, i.page) for i in found]
    assert got == [
        ("doi", "10.5555/rivers.2020.001", 1),  # lower-cased, the full stop after it dropped
        ("arxiv", "2003.01234", 1),
        ("arxiv", "hep-th/9901001", 1),
        ("doi", "10.1002/(sici)1097-4571(199806)49:8", 1),  # brackets it opened are kept
        ("isbn", "9780306406157", 2),  # ISBN-10 stored as ISBN-13
        ("isbn", "9783161484100", 2),
    ]
    doi = found[0]
    assert doi.match == "10.5555/Rivers.2020.001" and "https://doi.org/10.5555/Rivers.2020.001" in doi.snippet
    assert found[4].match == "0-306-40615-2" and "Copyright page. ISBN 0-306-40615-2" in found[4].snippet


def test_isbn_checksums():
    assert isbn10_ok("0306406152") and not isbn10_ok("0306406153")
    assert isbn10_ok("080442957X") and normalise_isbn("0-8044-2957-X") == "9780804429573"
    assert isbn13_ok("9783161484100") and not isbn13_ok("9783161484101")
    assert normalise_isbn("978-3-16-148410-1") is None and normalise_isbn("12345") is None
    assert kinds([(1, "ISBN 0-306-40615-3 and ISBN 978-3-16-148410-1")]) == []  # bad checksums: nothing


def test_reference_list_and_later_pages_are_excluded():
    page1 = ("On the references we make in passing, see our earlier note.\nOur paper: doi:10.1000/ours\n"
             "\n7. References\n[1] A. Other, doi:10.1000/theirs, ISBN 0-306-40615-2")
    page2 = "[2] arXiv:1501.00001"
    assert kinds([(1, page1), (2, page2)]) == [("doi", "10.1000/ours", 1)]
    german = "Titel\nLiteratur\nMüller: doi:10.1000/zitat"
    assert kinds([(1, german)]) == []
    assert kinds([(1, "## Bibliography\n10.1000/x")]) == []
    assert kinds([(1, "**References**\n10.1000/x")]) == []
    # Only the first pages: an identifier deep inside the body is not the document's.
    pages = [(p, f"page {p}") for p in range(1, 9)] + [(9, "doi:10.1000/deep")]
    assert kinds(pages) == [] and kinds(pages, max_pages=9) == [("doi", "10.1000/deep", 9)]
    assert kinds([(1, "arXiv:2013.01234")]) == []  # month 13: not an arXiv id


# ------------------------------------------------------------------------------ Crossref on loopback


WORK = {"title": ["Rivers of the World"], "author": [{"given": "Ada", "family": "Lovelace"}],
        "issued": {"date-parts": [[2020, 5]]}, "container-title": ["Journal of Rivers"], "publisher": "Loopback Press",
        "type": "journal-article"}


class Loopback:
    """A Crossref-like API in a thread: aiohttp's test server on 127.0.0.1."""

    def __init__(self, rate_limit: tuple[str, str] | None = None) -> None:
        self.hits: Counter[str] = Counter()
        self.times: list[float] = []
        self.rate_limit = rate_limit
        self.loop = asyncio.new_event_loop()
        app = web.Application()
        app.router.add_get("/works/{doi:.+}", self.work)
        app.router.add_get("/works", self.works)
        self.server = TestServer(app, host="127.0.0.1")
        started = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.run_until_complete(self.server.start_server())
            started.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()
        assert started.wait(10)
        self.url = str(self.server.make_url("")).rstrip("/")

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def _headers(self) -> dict[str, str]:
        if self.rate_limit:
            return {"X-Rate-Limit-Limit": self.rate_limit[0], "X-Rate-Limit-Interval": self.rate_limit[1]}
        return {}

    async def work(self, request: web.Request) -> web.Response:
        doi = request.match_info["doi"]
        self.hits[doi] += 1
        self.times.append(time.monotonic())
        if doi == "10.5555/limited" and self.hits[doi] == 1:
            return web.json_response({"status": "error"}, status=429, headers={"Retry-After": "1"})
        if doi == "10.5555/always-limited":
            return web.json_response({"status": "error"}, status=429, headers={"Retry-After": "1"})
        if doi == "10.5555/unknown":
            return web.Response(status=404, text="Resource not found.")
        return web.json_response({"status": "ok", "message": {**WORK, "DOI": doi}}, headers=self._headers())

    async def works(self, request: web.Request) -> web.Response:
        flt = request.query.get("filter", "")
        self.hits[flt] += 1
        items = [{**WORK, "DOI": "10.5555/book", "ISBN": ["9783161484100"], "type": "book"}] \
            if flt == "isbn:9783161484100" else []
        return web.json_response({"status": "ok", "message": {"items": items}})


@pytest.fixture
def crossref_server():
    server = Loopback()
    yield server
    server.close()


def test_lookup_is_cached_on_disk(crossref_server, tmp_path):
    cache = tmp_path / "cache"
    with Crossref(crossref_server.url, cache, delay=0) as client:
        meta = client.work("10.5555/Rivers")
        assert meta["title"] == "Rivers of the World" and meta["authors"] == ["Lovelace, Ada"] and meta["year"] == 2020
        assert client.work("10.5555/Rivers") == meta and client.stats.cache_hits == 1
        assert client.work("10.5555/unknown") is None  # not found is an answer: cached too
        assert client.isbn("9783161484100")["doi"] == "10.5555/book"
    with Crossref(crossref_server.url, cache, delay=0) as again:  # a new process would do the same
        assert again.work("10.5555/Rivers") == meta and again.work("10.5555/unknown") is None
        assert again.stats.requests == 0 and again.stats.cache_hits == 2
    assert crossref_server.hits == {"10.5555/Rivers": 1, "10.5555/unknown": 1, "isbn:9783161484100": 1}


def test_429_retry_after_is_honoured(crossref_server, tmp_path):
    with Crossref(crossref_server.url, tmp_path / "cache", delay=0) as client:
        t0 = time.monotonic()
        assert client.work("10.5555/limited")["title"] == "Rivers of the World"
        assert time.monotonic() - t0 >= 0.95  # waited the Retry-After second
        assert client.stats.rate_limited == 1 and crossref_server.hits["10.5555/limited"] == 2
        # Rate-limited for good: give up without caching anything, so a later run asks again.
        with pytest.raises(LookupError_):
            Crossref(crossref_server.url, tmp_path / "cache", delay=0, max_retries=1).work("10.5555/always-limited")
        assert crossref_server.hits["10.5555/always-limited"] == 2
        with pytest.raises(LookupError_):  # a Retry-After longer than we may wait: give up at once
            Crossref(crossref_server.url, tmp_path / "cache", delay=0, max_retries=3,
                     max_wait=0.5).work("10.5555/always-limited")
        assert crossref_server.hits["10.5555/always-limited"] == 3
        assert not any("always" in p.read_text() for p in (tmp_path / "cache").rglob("*.json"))


def test_polite_delay_follows_the_announced_rate_limit(tmp_path):
    server = Loopback(rate_limit=("4", "1s"))
    try:
        with Crossref(server.url, tmp_path / "cache", delay=0.05) as client:
            for n in range(3):
                client.work(f"10.5555/paced{n}")
            assert client.delay == pytest.approx(0.25)  # 4 per second announced
        gaps = [b - a for a, b in zip(server.times, server.times[1:])]
        assert len(gaps) == 2 and min(gaps) >= 0.2
    finally:
        server.close()


def test_publish_and_identify_with_lookup_via_the_command(crossref_server, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    make_text_pdf(src / "paper.pdf", [["Rivers of the World", "DOI: 10.5555/rivers"] + body_lines(1, 1),
                                      ["References", "doi:10.5555/cited"] + body_lines(1, 2)])
    make_text_pdf(src / "plain.pdf", [body_lines(2, 1)])
    run = tmp_path / "run"
    textlayer_run(run, src)
    lib = tmp_path / "lib"
    args = ("publish", str(run), "--library", str(lib), "--lookup", "--crossref", crossref_server.url,
            "--lookup-delay", "0", "--json")
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["lookup"]["requests"] == 1 and out["lookup"]["cache_hits"] == 0
    with Catalog(lib, readonly=True) as cat:
        meta = {r["doc_id"]: r["metadata"] for r in cat.documents()}
    assert meta["paper"]["title"] == "Rivers of the World" and meta["paper"]["matched"]["value"] == "10.5555/rivers"
    assert meta["plain"] is None
    assert crossref_server.hits == {"10.5555/rivers": 1}  # never the cited work
    again = json.loads(run_cli(*args).stdout)
    assert again["lookup"]["requests"] == 0 and again["lookup"]["cache_hits"] == 1
    assert again["counts"]["unchanged"] == 2
    proc = run_cli("identify", str(src / "paper.pdf"))
    line = json.loads(proc.stdout)
    assert [(i["type"], i["value"], i["page"]) for i in line["identifiers"]] == [("doi", "10.5555/rivers", 1)]
    assert "metadata" not in line  # offline unless asked
