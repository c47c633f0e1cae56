/* vlmocr report: the document table, the review view and the document view.
 *
 * Safety rule: text from OCR output (and every other value from the data files) reaches the
 * page only as text nodes (textContent / append(string)); this file never assigns innerHTML,
 * outerHTML or insertAdjacentHTML, and never builds URLs from data other than numbers we
 * wrote ourselves. Data files are scripts calling vlmocrData(name, value) because browsers
 * refuse fetch() on file:// URLs; they are loaded on demand and only a few are kept.
 */
"use strict";
(function () {
  // ------------------------------------------------------------------ data loading
  const cache = new Map();
  const waiting = new Map();
  const MAX_CACHED = 24;

  window.vlmocrData = function (name, value) {
    cache.set(name, value);
    const w = waiting.get(name);
    if (w) {
      waiting.delete(name);
      w.resolve(value);
    }
    if (cache.size > MAX_CACHED) {
      for (const key of cache.keys()) {
        if (cache.size <= MAX_CACHED) break;
        if (key !== "meta" && key !== "docs" && key !== name) cache.delete(key);
      }
    }
  };

  function load(name) {
    if (!/^[a-z_]+(\/[a-z_0-9]+)*$/.test(name)) return Promise.reject(new Error("bad data name"));
    if (cache.has(name)) return Promise.resolve(cache.get(name));
    if (waiting.has(name)) return waiting.get(name).promise;
    let resolve, reject;
    const promise = new Promise(function (res, rej) { resolve = res; reject = rej; });
    waiting.set(name, { resolve: resolve, reject: reject, promise: promise });
    const s = document.createElement("script");
    s.src = "data/" + name + ".js";
    s.onload = function () {
      s.remove();
      if (waiting.has(name)) {
        waiting.delete(name);
        reject(new Error("data/" + name + ".js did not deliver its data"));
      }
    };
    s.onerror = function () {
      s.remove();
      waiting.delete(name);
      reject(new Error("cannot load data/" + name + ".js"));
    };
    document.head.appendChild(s);
    return promise;
  }

  // ------------------------------------------------------------------ DOM helpers
  function el(tag, attrs) {
    const e = document.createElement(tag);
    if (attrs) {
      for (const k of Object.keys(attrs)) {
        const v = attrs[k];
        if (v === null || v === undefined || v === false) continue;
        if (k === "class") e.className = v;
        else if (k === "text") e.textContent = String(v);
        else if (k.slice(0, 2) === "on") e.addEventListener(k.slice(2), v);
        else e.setAttribute(k, String(v));
      }
    }
    for (let i = 2; i < arguments.length; i++) append(e, arguments[i]);
    return e;
  }

  function append(parent, kid) {
    if (kid === null || kid === undefined || kid === false) return;
    if (Array.isArray(kid)) { kid.forEach(function (k) { append(parent, k); }); return; }
    parent.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }

  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }

  // The words' boxes (thousandths of the page) drawn over the page's thumbnail, so a reviewer sees
  // at a glance whether the positions are right (issue 29).
  function wordBoxes(p) {
    if (!Array.isArray(p.boxes) || !p.boxes.length) return null;
    const NS = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(NS, "svg");
    svg.setAttribute("id", "word-boxes");
    svg.setAttribute("viewBox", "0 0 1000 1000");
    svg.setAttribute("preserveAspectRatio", "none");
    p.boxes.forEach(function (b) {
      if (!Array.isArray(b) || b.length !== 4) return;
      const r = document.createElementNS(NS, "rect");
      r.setAttribute("class", "wbox");
      r.setAttribute("x", String(Number(b[0])));
      r.setAttribute("y", String(Number(b[1])));
      r.setAttribute("width", String(Math.max(0, Number(b[2]) - Number(b[0]))));
      r.setAttribute("height", String(Math.max(0, Number(b[3]) - Number(b[1]))));
      svg.append(r);
    });
    return svg;
  }

  function pct(v, digits) {
    if (v === null || v === undefined || Number.isNaN(v)) return "—";
    return (v * 100).toFixed(digits === undefined ? 2 : digits) + " %";
  }

  function num(v) {
    if (v === null || v === undefined) return "—";
    return Number(v).toLocaleString("en-US");
  }

  function badge(name, label) {
    const safe = /^[a-z_]+$/.test(name) ? name : "other";
    return el("span", { class: "badge st-" + safe, text: label || name });
  }

  function hashParams() { return new URLSearchParams(location.hash.slice(1)); }

  function intParam(params, key, dflt) {
    const v = parseInt(params.get(key) || "", 10);
    return Number.isFinite(v) ? v : dflt;
  }

  function chunkOf(meta, g) {
    const starts = meta.chunk_starts;
    let lo = 0, hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid] <= g) lo = mid; else hi = mid - 1;
    }
    return lo;
  }

  function pageAt(meta, g) {
    const c = chunkOf(meta, g);
    return load("c/" + c).then(function (chunk) {
      return { chunk: chunk, page: chunk.pages[g - chunk.start] };
    });
  }

  function isTyping(ev) {
    const t = ev.target;
    return t && (t.tagName === "INPUT" || t.tagName === "SELECT" || t.tagName === "TEXTAREA" || t.isContentEditable);
  }

  function thumbSrc(p) {
    return typeof p.thumb === "string" && /^thumbs\/[0-9a-f]{20}\.jpg$/.test(p.thumb) ? p.thumb : null;
  }

  function textBlock(id, text) {
    const pre = el("pre", { id: id, class: "text" + (text ? "" : " empty") });
    pre.textContent = text || "";
    return pre;
  }

  function diffBlock(ops) {
    const pre = el("pre", { id: "diff", class: "text diff" });
    (ops || []).forEach(function (op) {
      const kind = op[0], s = op[1];
      if (kind === "=") pre.append(document.createTextNode(s));
      else if (kind === "-") pre.append(el("del", { title: "in the truth, not in the text", text: s }));
      else if (kind === "+") pre.append(el("ins", { title: "in the text, not in the truth", text: s }));
    });
    return pre;
  }

  function showError(app, err) {
    clear(app);
    app.append(el("p", { class: "note error", text: "Cannot show this view: " + (err && err.message ? err.message : err) }));
  }

  // ------------------------------------------------------------------ review view
  function reviewView(app) {
    let meta = null;
    let token = 0;

    function queueNames() {
      return Object.keys(meta.queues).filter(function (q) { return meta.queues[q] > 0; });
    }

    function current() {
      const params = hashParams();
      let q = params.get("q") || "all";
      if (!Object.prototype.hasOwnProperty.call(meta.queues, q)) q = "all";
      const total = meta.queues[q] || 0;
      let n = intParam(params, "n", 0);
      n = Math.max(0, Math.min(n, total - 1));
      return { q: q, n: n, total: total };
    }

    function go(q, n) {
      const total = meta.queues[q] || 0;
      if (!total) return;
      n = Math.max(0, Math.min(n, total - 1));
      location.hash = "q=" + q + "&n=" + n;
    }

    function step(delta) {
      const c = current();
      if (c.total) go(c.q, c.n + delta);
    }

    function queueLabel(q) {
      return q === "cer" ? "CER > " + (meta.cer_threshold * 100) + " %" : q === "all" ? "all flagged" : q;
    }

    function render() {
      const mine = ++token;
      const c = current();
      if (!c.total) {
        clear(app);
        app.append(el("p", { class: "note", id: "no-flagged", text: "No flagged pages in this queue." }),
          el("p", {}, el("a", { href: "index.html", text: "Back to the summary" })));
        return;
      }
      const qc = Math.floor(c.n / meta.queue_chunk);
      load("q/" + c.q + "/" + qc).then(function (refs) {
        const ref = refs[c.n - qc * meta.queue_chunk];
        return pageAt(meta, ref[0]).then(function (res) { return { ref: ref, res: res }; });
      }).then(function (x) {
        if (mine !== token) return;
        draw(c, x.res.page, x.res.chunk.docs[x.res.page.d]);
        prefetch(c);
      }).catch(function (err) { if (mine === token) showError(app, err); });
    }

    function prefetch(c) {
      const next = c.n + 1;
      if (next >= c.total) return;
      const qc = Math.floor(next / meta.queue_chunk);
      load("q/" + c.q + "/" + qc).then(function (refs) {
        const ref = refs[next - qc * meta.queue_chunk];
        if (ref) load("c/" + ref[1]).catch(function () {});
      }).catch(function () {});
    }

    function draw(c, p, doc) {
      clear(app);
      const select = el("select", { id: "queue", "aria-label": "review queue" });
      queueNames().forEach(function (q) {
        const opt = el("option", { value: q, text: queueLabel(q) + " (" + num(meta.queues[q]) + ")" });
        if (q === c.q) opt.selected = true;
        select.append(opt);
      });
      select.addEventListener("change", function () { go(select.value, 0); select.blur(); });
      const bar = el("div", { class: "bar", id: "review-bar" },
        el("button", { id: "prev", type: "button", disabled: c.n === 0, onclick: function () { step(-1); } }, "← prev (k)"),
        el("span", { id: "pos" }, "Flagged page ", el("b", { id: "pos-n", text: String(c.n + 1) }), " of ",
          el("b", { id: "pos-total", text: num(c.total) })),
        el("button", { id: "next", type: "button", disabled: c.n >= c.total - 1, onclick: function () { step(1); } }, "next (j) →"),
        select,
        el("a", { href: "doc.html#d=" + p.d + "&g=" + doc.start + "&o=" + (Math.floor((p.g - doc.start) / 50) * 50) + "&p=" + p.g,
          id: "doc-link", text: "document view" }),
        el("span", { class: "help", text: "keys: j / → next · k / ← previous" }));
      app.append(bar);

      app.append(el("h2", { id: "page-title" }, el("span", { id: "doc-id", text: doc.id }), " — ",
        el("span", { id: "page-no", text: p.page > 0 ? "page " + p.page : "whole document" })));
      const why = el("div", { class: "badges", id: "reasons" });
      why.append(badge(p.status, p.status));
      p.reasons.filter(function (r) { return r !== p.status; }).forEach(function (r) { why.append(" ", badge(r, r === "cer" ? "CER > threshold" : r)); });
      app.append(why);

      const figure = el("figure", { class: "img", id: "page-figure" });
      const src = thumbSrc(p);
      if (src) {
        const stack = el("div", { class: "page-stack" },
          el("a", { href: src, target: "_blank" }, el("img", { id: "page-img", src: src, alt: "page " + p.page + " of " + doc.id })));
        const boxes = wordBoxes(p);
        if (boxes) {
          stack.append(boxes);
          figure.append(stack, el("label", { class: "help", id: "boxes-toggle" },
            el("input", { type: "checkbox", id: "show-boxes", checked: "checked",
              onchange: function (ev) { boxes.style.display = ev.target.checked ? "" : "none"; } }),
            " word boxes (" + p.boxes.length + ", " + (p.boxes_from || "engine") + ")"));
        } else figure.append(stack);
      } else figure.append(el("p", { class: "note", id: "no-img", text: p.thumb_note || "no thumbnail" }));

      const facts = el("table", { class: "kv", id: "facts" });
      function row(k, v, id) {
        if (v === null || v === undefined || v === "") return;
        facts.append(el("tr", {}, el("th", { text: k }), el("td", { id: id || null }, v)));
      }
      row("status", badge(p.status, p.status), "f-status");
      row("flags", (p.flags && p.flags.length) ? p.flags.join(", ") : "none", "f-flags");
      row("finish reason", p.finish_reason || "—", "f-finish");
      if (p.quality) row("quality", Number(p.quality.score).toFixed(2) + (p.quality.threshold !== null && p.quality.threshold !== undefined ? " (suspect below " + Number(p.quality.threshold).toFixed(2) + ")" : ""), "f-quality");
      row("attempt", String(p.attempt) + (p.tries > 1 ? " (" + p.tries + " records of this page)" : ""), "f-attempt");
      row("engine", p.engine || "—", "f-engine");
      if (p.language || (p.quality && p.quality.language)) {
        // What the page was read as (its document's language, else the run's) and the word list it was judged by.
        const judged = p.quality && p.quality.language ? "judged by the " + p.quality.language + " word list" : "";
        row("language", (p.language || "") + (p.language_from ? " (" + p.language_from + ")" : "") +
          (p.language && judged ? "; " : "") + judged, "f-language");
      }
      row("model", p.model);
      row("error", p.error, "f-error");
      if (p.cer !== undefined) row("CER", pct(p.cer) + "  (" + num(p.edits) + " edits / " + num(p.ref_chars) + " truth chars)", "f-cer");
      if (p.cer_clean !== undefined) row("CER cleaned", pct(p.cer_clean), "f-cer-clean");
      row("seconds", p.seconds !== null && p.seconds !== undefined ? Number(p.seconds).toFixed(2) : null);
      if (p.width && p.height) row("image", p.width + " × " + p.height + " px" + (p.dpi ? " at " + p.dpi + " dpi" : ""));
      if (p.tokens_in || p.tokens_out) row("tokens in / out", num(p.tokens_in) + " / " + num(p.tokens_out));
      row("source", p.source || doc.source, "f-source");
      row("finished", p.finished_at);

      const texts = el("div", { class: "texts" + (p.clean !== undefined ? " two" : "") },
        el("section", {}, el("h3", { text: "Raw text" }), textBlock("text-raw", p.text)));
      if (p.clean !== undefined) texts.append(el("section", {}, el("h3", { text: "Cleaned text" }), textBlock("text-clean", p.clean)));
      else if (meta.has_clean) texts.append(el("section", {}, el("h3", { text: "Cleaned text" }), el("p", { class: "note", text: "not in the cleaned layer" })));

      const side = el("div", { class: "side" }, facts, texts);
      if (p.truth !== undefined) {
        side.append(el("section", { class: "diffbox" },
          el("h3", {}, "Diff against the truth ", el("span", { class: "legend" }, el("del", { text: "missed (truth only)" }), " ", el("ins", { text: "extra (text only)" }))),
          diffBlock(p.diff)),
          el("details", {}, el("summary", { text: "Truth" }), textBlock("text-truth", p.truth)));
      } else if (meta.has_truth) {
        side.append(el("p", { class: "note", text: "No truth for this page." }));
      }
      app.append(el("div", { class: "review-grid" }, figure, side));
      document.title = "Review " + (c.n + 1) + "/" + c.total + " · " + doc.id + " p" + p.page;
    }

    load("meta").then(function (m) {
      meta = m;
      window.addEventListener("hashchange", render);
      document.addEventListener("keydown", function (ev) {
        if (isTyping(ev) || ev.altKey || ev.ctrlKey || ev.metaKey) return;
        if (ev.key === "j" || ev.key === "ArrowRight") { ev.preventDefault(); step(1); }
        else if (ev.key === "k" || ev.key === "ArrowLeft") { ev.preventDefault(); step(-1); }
        else if (ev.key === "Home") { ev.preventDefault(); go(current().q, 0); }
        else if (ev.key === "End") { ev.preventDefault(); const c = current(); go(c.q, c.total - 1); }
      });
      render();
    }).catch(function (err) { showError(app, err); });
  }

  // ------------------------------------------------------------------ document view
  const DOC_PAGE = 50;

  function docView(app) {
    let meta = null;
    let token = 0;

    function render() {
      const mine = ++token;
      const params = hashParams();
      const d = intParam(params, "d", 0);
      const g = Math.max(0, Math.min(intParam(params, "g", 0), Math.max(0, meta.pages - 1)));
      const focus = intParam(params, "p", -1);
      pageAt(meta, g).then(function (res) {
        const doc = res.chunk.docs[d];
        if (!doc) throw new Error("no document " + d + " at position " + g);
        const o = Math.max(0, Math.min(intParam(params, "o", 0), doc.n - 1));
        const first = doc.start + o, last = Math.min(doc.start + doc.n, first + DOC_PAGE) - 1;
        const names = [];
        for (let c = chunkOf(meta, first); c <= chunkOf(meta, last); c++) names.push("c/" + c);
        return Promise.all(names.map(load)).then(function (chunks) {
          if (mine !== token) return;
          const pages = [];
          chunks.forEach(function (ch) {
            ch.pages.forEach(function (p) { if (p.g >= first && p.g <= last) pages.push(p); });
          });
          draw(d, doc, o, pages, focus);
        });
      }).catch(function (err) { if (mine === token) showError(app, err); });
    }

    function draw(d, doc, o, pages, focus) {
      clear(app);
      function link(off, label, id) {
        if (off < 0 || off >= doc.n) return el("span", { class: "disabled", text: label });
        return el("a", { id: id, href: "doc.html#d=" + d + "&g=" + doc.start + "&o=" + off, text: label });
      }
      app.append(el("h2", { id: "doc-title", text: doc.id }),
        el("p", { class: "sub" }, "source ", el("code", { text: doc.source }), " · ", num(doc.n), " pages"),
        el("div", { class: "pager" }, link(o - DOC_PAGE, "← previous " + DOC_PAGE, "doc-prev"), " ",
          el("span", { text: "pages " + (o + 1) + "–" + Math.min(doc.n, o + DOC_PAGE) + " of " + doc.n }), " ",
          link(o + DOC_PAGE, "next " + DOC_PAGE + " →", "doc-next")));
      const list = el("div", { class: "page-list" });
      pages.forEach(function (p) {
        const head = el("h3", {}, p.page > 0 ? "Page " + p.page : "Whole document", " ", badge(p.status, p.status));
        p.reasons.filter(function (r) { return r !== p.status; }).forEach(function (r) { head.append(" ", badge(r, r === "cer" ? "CER > threshold" : r)); });
        if (p.cer !== undefined) head.append(" ", el("span", { class: "cer", text: "CER " + pct(p.cer, 1) }));
        if (p.ord !== null && p.ord !== undefined) head.append(" ", el("a", { href: "review.html#q=all&n=" + p.ord, text: "review" }));
        const body = el("div", { class: "page-body" + (thumbSrc(p) ? " with-img" : "") });
        if (thumbSrc(p)) body.append(el("img", { src: thumbSrc(p), loading: "lazy", alt: "page " + p.page }));
        const cols = el("div", { class: "texts" + (p.clean !== undefined ? " two" : "") },
          el("section", {}, el("h4", { text: "raw" }), textBlock("text-" + p.g, p.text)));
        if (p.clean !== undefined) cols.append(el("section", {}, el("h4", { text: "cleaned" }), textBlock("clean-" + p.g, p.clean)));
        body.append(cols);
        if (p.error) body.append(el("p", { class: "note error", text: p.error }));
        list.append(el("article", { class: "page-card", id: "g" + p.g }, head, body));
      });
      app.append(list);
      document.title = doc.id + " · " + meta.title;
      if (focus >= 0) {
        const target = document.getElementById("g" + focus);
        if (target) { target.classList.add("focus"); target.scrollIntoView(); }
      }
    }

    load("meta").then(function (m) {
      meta = m;
      window.addEventListener("hashchange", render);
      render();
    }).catch(function (err) { showError(app, err); });
  }

  // ------------------------------------------------------------------ document table (index)
  const ROWS_PER_PAGE = 100;

  function indexView() {
    const table = document.getElementById("doc-table");
    document.addEventListener("keydown", function (ev) {
      if (isTyping(ev) || ev.altKey || ev.ctrlKey || ev.metaKey) return;
      const start = document.getElementById("start-review");
      if (start && (ev.key === "j" || ev.key === "ArrowRight")) { ev.preventDefault(); location.href = start.getAttribute("href"); }
    });
    if (!table) return;
    const tbody = table.tBodies[0];
    const pager = document.getElementById("doc-pager");
    const filter = document.getElementById("doc-filter");
    const onlyFlagged = document.getElementById("doc-flagged-only");
    const count = document.getElementById("doc-count");
    const headers = Array.prototype.slice.call(table.tHead.rows[0].cells);
    const shown = headers.map(function (th) { return th.getAttribute("data-col"); });
    let rows = [], view = [], col = {}, sortCol = "doc", sortDir = 1, page = 0;

    function cell(name, r) {
      const v = r[col[name]];
      if (name === "doc") {
        return el("td", {}, el("a", { href: "doc.html#d=" + r[col.i] + "&g=" + r[col.start], text: v }),
          el("div", { class: "src", text: r[col.source] }));
      }
      if (name === "flagged" && v > 0 && r[col.first] !== null) {
        return el("td", { class: "num" }, el("a", { href: "review.html#q=all&n=" + r[col.first], text: num(v) }));
      }
      if (name === "cer" || name === "cer_clean") return el("td", { class: "num", text: pct(v) });
      if (name === "lang") return el("td", { text: v || "—" });
      if (name === "seconds") return el("td", { class: "num", text: Number(v).toFixed(1) });
      return el("td", { class: "num" + (v > 0 && (name === "review" || name === "failed" || name === "fallback") ? " warn" : ""), text: num(v) });
    }

    function apply() {
      const f = (filter.value || "").toLowerCase();
      const flaggedOnly = onlyFlagged.checked;
      view = rows.filter(function (r) {
        if (flaggedOnly && !(r[col.flagged] > 0)) return false;
        if (!f) return true;
        return String(r[col.doc]).toLowerCase().indexOf(f) >= 0 || String(r[col.source]).toLowerCase().indexOf(f) >= 0;
      });
      const k = col[sortCol];
      view.sort(function (a, b) {
        let x = a[k], y = b[k];
        if (x === null || x === undefined) x = sortCol === "doc" ? "" : -Infinity;
        if (y === null || y === undefined) y = sortCol === "doc" ? "" : -Infinity;
        if (x < y) return -sortDir;
        if (x > y) return sortDir;
        return a[col.i] - b[col.i];
      });
      headers.forEach(function (th) {
        const c = th.getAttribute("data-col");
        th.setAttribute("aria-sort", c === sortCol ? (sortDir > 0 ? "ascending" : "descending") : "none");
      });
      page = Math.min(page, Math.max(0, Math.ceil(view.length / ROWS_PER_PAGE) - 1));
      draw();
    }

    function draw() {
      clear(tbody);
      const frag = document.createDocumentFragment();
      view.slice(page * ROWS_PER_PAGE, (page + 1) * ROWS_PER_PAGE).forEach(function (r) {
        frag.append(el("tr", {}, shown.map(function (name) { return cell(name, r); })));
      });
      tbody.append(frag);
      count.textContent = num(view.length) + " of " + num(rows.length) + " documents";
      clear(pager);
      const pages = Math.max(1, Math.ceil(view.length / ROWS_PER_PAGE));
      pager.append(
        el("button", { type: "button", id: "doc-prev", disabled: page === 0, onclick: function () { page--; draw(); } }, "←"),
        el("span", { id: "doc-page", text: " page " + (page + 1) + " of " + pages + " " }),
        el("button", { type: "button", id: "doc-next", disabled: page >= pages - 1, onclick: function () { page++; draw(); } }, "→"));
    }

    headers.forEach(function (th) {
      function sort() {
        const c = th.getAttribute("data-col");
        if (sortCol === c) sortDir = -sortDir; else { sortCol = c; sortDir = c === "doc" ? 1 : -1; }
        page = 0;
        apply();
      }
      th.addEventListener("click", sort);
      th.addEventListener("keydown", function (ev) { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); sort(); } });
    });
    filter.addEventListener("input", function () { page = 0; apply(); });
    onlyFlagged.addEventListener("change", function () { page = 0; apply(); });

    load("docs").then(function (data) {
      data.cols.forEach(function (name, i) { col[name] = i; });
      rows = data.rows;
      table.setAttribute("data-loaded", "1");
      apply();
    }).catch(function (err) {
      count.textContent = "Cannot load the document table: " + err.message;
    });
  }

  // ------------------------------------------------------------------ start
  const viewName = document.body.getAttribute("data-view");
  const app = document.getElementById("app");
  if (viewName === "review") reviewView(app);
  else if (viewName === "doc") docView(app);
  else indexView();
})();
