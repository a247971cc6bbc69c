// vitals-engine log viewer: a single-page app over the data API (see view/api.py).
//
// Everything read from logs is untrusted: the DOM is built with createElement
// and textContent only (never innerHTML), images are shown only from data:
// URIs, and every URL is relative so the page works from the live server and
// from a static bundle alike.
"use strict";

(function () {
  // ---------------------------------------------------------------- DOM helpers

  const SVG_NS = "http://www.w3.org/2000/svg";

  // Append children (nodes, strings, nested arrays; null and false skipped) to node.
  function add(node, ...children) {
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      if (Array.isArray(child)) add(node, ...child);
      else if (child instanceof Node) node.appendChild(child);
      else node.appendChild(document.createTextNode(String(child)));
    }
    return node;
  }

  // el("a", {class: "x", href: "#/", onclick: fn}, "text", child): properties are
  // set one by one; event handlers must be functions (a string never becomes code).
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key.startsWith("on")) {
        if (typeof value !== "function") throw new Error("handlers must be functions");
        node.addEventListener(key.slice(2), value);
      } else if (key === "class") node.className = value;
      else if (key === "text") node.textContent = String(value);
      else if (key === "src") node.src = value;
      else if (key === "value") node.value = value;
      else if (key === "checked" || key === "disabled" || key === "hidden") node[key] = Boolean(value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    return add(node, ...children);
  }

  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (key === "text") node.textContent = String(value);
      else node.setAttribute(key, String(value));
    }
    return add(node, ...children);
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
    return node;
  }

  function replace(node, ...children) {
    return add(clear(node), ...children);
  }

  // ---------------------------------------------------------------- formatting

  const nf = new Intl.NumberFormat();

  function fmtInt(n) {
    return n === null || n === undefined ? "—" : nf.format(n);
  }

  // "1 sample", "2 samples" (`words` for a plural not made with "s").
  function plural(n, word, words) {
    return fmtInt(n) + " " + (n === 1 ? word : words || word + "s");
  }

  function fmtNum(x) {
    if (x === null || x === undefined || x === "") return "—";
    if (typeof x !== "number") return String(x);
    if (Number.isInteger(x)) return nf.format(x);
    return Math.abs(x) >= 100 ? x.toFixed(1) : x.toPrecision(3).replace(/\.?0+$/, "");
  }

  function fmtCost(x) {
    if (x === null || x === undefined) return "—";
    if (x === 0) return "$0";
    return x < 0.01 ? "$" + x.toPrecision(2) : "$" + x.toFixed(x < 10 ? 3 : 2);
  }

  function parseTime(value) {
    if (!value) return NaN;
    return Date.parse(value);
  }

  function fmtDate(value) {
    const t = parseTime(value);
    if (Number.isNaN(t)) return value ? String(value) : "—";
    return new Date(t).toLocaleString(undefined, {
      year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit",
    });
  }

  // Unix seconds (as batch records keep times) as a date and time.
  function fmtUnix(seconds) {
    if (typeof seconds !== "number") return "—";
    return new Date(seconds * 1000).toLocaleString(undefined, {
      month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit",
    });
  }

  function fmtSeconds(s) {
    if (s === null || s === undefined || Number.isNaN(s)) return "—";
    if (s < 1) return (s * 1000).toFixed(0) + " ms";
    if (s < 60) return s.toFixed(s < 10 ? 2 : 1) + " s";
    const m = Math.floor(s / 60);
    if (m < 60) return m + " min " + Math.round(s % 60) + " s";
    return Math.floor(m / 60) + " h " + (m % 60) + " min";
  }

  function scoreText(value) {
    if (value === null || value === undefined) return "—";
    if (typeof value === "number") return fmtNum(value);
    return String(value);
  }

  function gradeClass(value) {
    if (value === null || value === undefined) return "grade-none";
    if (value === "C" || value === "P" || value === "I") return "grade-" + value;
    if (value === true || value === 1) return "grade-C";
    if (value === false || value === 0) return "grade-I";
    return "";
  }

  function scoreBadge(value) {
    return el("span", { class: "score " + gradeClass(value), text: scoreText(value) });
  }

  function statusBadge(status) {
    const known = ["success", "started", "error", "cancelled"];
    const cls = known.includes(status) ? "status-" + status : "";
    return el("span", { class: "badge " + cls, text: status === "started" ? "running" : status });
  }

  function metricsText(metrics) {
    const parts = Object.entries(metrics || {}).map(([k, v]) => k + " " + fmtNum(v));
    return parts.length ? parts.join(", ") : "—";
  }

  function firstMetric(entry) {
    const values = Object.values(entry.metrics || {});
    return values.length && typeof values[0] === "number" ? values[0] : null;
  }

  function json(value) {
    return el("pre", { class: "json", text: JSON.stringify(value, null, 2) });
  }

  function kv(pairs) {
    const dl = el("dl", { class: "kv" });
    for (const [k, v] of pairs) {
      if (v === null || v === undefined || v === "") continue;
      add(dl, [el("dt", { text: k }), el("dd", {}, v)]);
    }
    return dl;
  }

  function card(label, value, extraClass, note) {
    return el("div", { class: "card" + (extraClass ? " " + extraClass : "") },
      el("div", { class: "label", text: label }), el("div", { class: "value" }, value), note || null);
  }

  // A metric's standard error, 95% interval and count, under its value (when known).
  function metricNote(stat) {
    if (!stat || typeof stat.stderr !== "number") return null;
    const parts = [];
    if (typeof stat.low === "number" && typeof stat.high === "number") {
      parts.push("95% CI " + fmtNum(stat.low) + "\u2013" + fmtNum(stat.high));
    }
    if (typeof stat.n === "number") {
      parts.push(typeof stat.clusters === "number" && stat.clusters !== stat.n
        ? plural(stat.n, "score") + " in " + plural(stat.clusters, "cluster")
          + (stat.cluster ? " by " + stat.cluster : "")
        : plural(stat.n, "sample"));
    }
    return el("div", { class: "stat" },
      el("span", { class: "stderr", title: "standard error", text: "\u00b1 " + fmtNum(stat.stderr) }),
      parts.length ? el("span", { class: "interval", text: parts.join(" \u00b7 ") }) : null);
  }

  // ---------------------------------------------------------------- data API

  function logBase(file) {
    return "api/logs/" + file.split("/").map(encodeURIComponent).join("/");
  }

  async function getJSON(url) {
    const response = await fetch(url, { cache: "no-store" });
    if (!response.ok) {
      let message = response.status + " " + response.statusText;
      try { message = (await response.json()).error || message; } catch (e) { /* not JSON */ }
      const error = new Error(message);
      error.status = response.status;
      throw error;
    }
    return response.json();
  }

  const store = {
    loaded: false,
    live: false,
    logs: [],
    errors: [],
    byFile: new Map(),
    previous: new Map(), // entries as they were, to follow a journal to its final log
    data: new Map(), // file -> LogData
    views: new Map(), // file -> table state (filter, sort, page)
  };

  // The rows of one log, merged from `summaries.json` (and its live increments), and
  // the text its in-flight samples stream so far, from `live.json` (a running log's).
  class LogData {
    constructor(file) {
      this.file = file;
      this.rows = [];
      this.index = new Map();
      this.version = null;
      this.complete = false;
      this.revision = 0;
      this.loading = null;
      this.pending = false;
      this.live = new Map(); // "key/epoch" -> {key, id, epoch, role, input, text, chars, updated}
      this.finishing = new Map(); // gone from live.json, their finished row not here yet
      this.liveLoading = null;
      this.livePending = false;
      this.batches = null; // batches.json: the run's provider batches (a log that has any)
      this.batchesLoading = null;
      this.batchesPending = false;
    }

    // Whether the finished row of `id` came after this live text: the text is done with.
    finished(id, entry) {
      const at = this.index.get(id);
      const row = at === undefined ? null : this.rows[at];
      return Boolean(row) && typeof row.completed === "number" && row.completed + 0.001 >= entry.updated;
    }

    takeLive(doc) {
      const next = new Map();
      if (doc.running) {
        for (const sample of doc.samples || []) next.set(sample.key + "/" + sample.epoch, sample);
      }
      // A sample whose text went away finished: keep its text until its row comes.
      for (const [id, entry] of this.live) {
        if (doc.running && !next.has(id) && !this.finished(id, entry)) this.finishing.set(id, entry);
      }
      for (const id of next.keys()) this.finishing.delete(id);
      if (!doc.running) this.finishing.clear();
      this.live = next;
    }

    clearLive() {
      this.live = new Map();
      this.finishing = new Map();
    }

    // The live text of a sample still in flight (null when it has none, or it finished).
    liveEntry(id) {
      const entry = this.live.get(id) || this.finishing.get(id);
      return entry && !this.finished(id, entry) ? entry : null;
    }

    // The in-flight samples with their text so far, by id and epoch.
    liveRows() {
      const rows = [];
      for (const map of [this.live, this.finishing]) {
        for (const [id, entry] of map) {
          if (!this.finished(id, entry)) rows.push(Object.assign({ finishing: map === this.finishing }, entry));
        }
      }
      return rows.sort((a, b) => compareValues(a.id, b.id) || a.epoch - b.epoch);
    }

    // Fetch the live text; calls made meanwhile coalesce into one more fetch.
    refreshLive() {
      if (this.liveLoading) {
        this.livePending = true;
        return this.liveLoading;
      }
      this.liveLoading = (async () => {
        do {
          this.livePending = false;
          this.takeLive(await getJSON(logBase(this.file) + "/live.json"));
        } while (this.livePending);
      })().finally(() => { this.liveLoading = null; });
      return this.liveLoading;
    }

    // Fetch the provider batches; calls made meanwhile coalesce into one more fetch.
    refreshBatches() {
      if (this.batchesLoading) {
        this.batchesPending = true;
        return this.batchesLoading;
      }
      this.batchesLoading = (async () => {
        do {
          this.batchesPending = false;
          this.batches = await getJSON(logBase(this.file) + "/batches.json");
        } while (this.batchesPending);
      })().finally(() => { this.batchesLoading = null; });
      return this.batchesLoading;
    }

    merge(doc) {
      if (doc.reset) {
        this.rows = [];
        this.index = new Map();
      }
      for (const row of doc.rows) {
        const id = row.key + "/" + row.epoch;
        const at = this.index.get(id);
        if (at === undefined) {
          this.index.set(id, this.rows.length);
          this.rows.push(row);
        } else {
          this.rows[at] = row;
        }
        const leaving = this.finishing.get(id);
        if (leaving && this.finished(id, leaving)) this.finishing.delete(id);
      }
      this.version = doc.version;
      this.complete = doc.complete;
      if (doc.reset || doc.rows.length) this.revision += 1;
    }

    // Fetch what is new; calls made meanwhile coalesce into one more fetch.
    refresh() {
      if (this.loading) {
        this.pending = true;
        return this.loading;
      }
      this.loading = (async () => {
        do {
          this.pending = false;
          const since = store.live && this.version !== null ? "?since=" + this.version : "";
          this.merge(await getJSON(logBase(this.file) + "/summaries.json" + since));
        } while (this.pending);
      })().finally(() => { this.loading = null; });
      return this.loading;
    }
  }

  // Whether the page follows `file` while it runs (live server, log still running).
  function isRunning(file) {
    const entry = store.byFile.get(file);
    return store.live && Boolean(entry) && Boolean(entry.running);
  }

  // Whether the log's run sent provider batches (its entry counts them).
  function hasBatches(file) {
    const entry = store.byFile.get(file);
    return Boolean(entry) && entry.batches > 0;
  }

  // The logs the page shows now: their rows are kept however many there are.
  let pinned = new Set();
  const KEEP_LOADED = 4;

  function logData(file) {
    let data = store.data.get(file);
    if (!data) {
      data = new LogData(file);
      store.data.set(file, data);
      for (const other of store.data.keys()) {
        if (store.data.size <= KEEP_LOADED) break;
        if (other !== file && !pinned.has(other)) store.data.delete(other);
      }
    }
    return data;
  }

  let logsLoading = null;
  let logsPending = false;

  function takeLogs(doc) {
    for (const [file, entry] of store.byFile) store.previous.set(file, entry);
    store.loaded = true;
    store.live = Boolean(doc.live);
    store.logs = doc.logs || [];
    store.errors = doc.errors || [];
    store.byFile = new Map(store.logs.map((e) => [e.file, e]));
  }

  // Fetch the list of logs; calls made meanwhile coalesce into one more fetch.
  function refreshLogs() {
    if (logsLoading) {
      logsPending = true;
      return logsLoading;
    }
    logsLoading = (async () => {
      do {
        logsPending = false;
        takeLogs(await getJSON("api/logs.json"));
      } while (logsPending);
    })().finally(() => { logsLoading = null; });
    return logsLoading;
  }

  // ---------------------------------------------------------------- routing

  // #/                                        the list of logs
  // #/log/<file>                              one log
  // #/log/<file>/sample/<key>/<n>             one sample (epoch n)
  // #/compare/<file>,<file>,...               two or more logs of one task side by side
  // #/compare/<file>,.../sample/<key>/<n>     one sample's answers in each of them
  // (each <file> percent-encoded: its `/`s and `,`s never separate)
  function parseRoute() {
    const parts = location.hash.replace(/^#\/?/, "").split("/").filter((p) => p !== "");
    try {
      if (parts[0] === "compare" && parts.length >= 2) {
        const files = parts[1].split(",").filter((f) => f !== "").map(decodeURIComponent);
        if (parts[2] === "sample" && parts.length >= 5) {
          return { view: "compare-sample", files, key: decodeURIComponent(parts[3]), epoch: Number(parts[4]) };
        }
        return { view: "compare", files };
      }
      if (parts[0] === "log" && parts.length >= 2) {
        const file = decodeURIComponent(parts[1]);
        if (parts[2] === "sample" && parts.length >= 5) {
          return { view: "sample", file, key: decodeURIComponent(parts[3]), epoch: Number(parts[4]) };
        }
        return { view: "log", file };
      }
    } catch (e) { /* a malformed hash: show the list */ }
    return { view: "list" };
  }

  function logHref(file) {
    return "#/log/" + encodeURIComponent(file);
  }

  function sampleHref(file, key, epoch) {
    return logHref(file) + "/sample/" + encodeURIComponent(key) + "/" + epoch;
  }

  function compareHref(files) {
    return "#/compare/" + files.map(encodeURIComponent).join(",");
  }

  function compareSampleHref(files, key, epoch) {
    return compareHref(files) + "/sample/" + encodeURIComponent(key) + "/" + epoch;
  }

  // The logs a route shows.
  function routeFiles(route) {
    return route.files || (route.file ? [route.file] : []);
  }

  // The final log a journal became (null when it is still listed, or became none).
  function finalOf(file) {
    if (store.byFile.has(file)) return null;
    const before = store.previous.get(file);
    return before && before.final && store.byFile.has(before.final) ? before.final : null;
  }

  // A journal that became its final log: follow it, keeping the rest of the route.
  function followFinal(route) {
    const files = routeFiles(route);
    if (!files.some(finalOf)) return false;
    const now = files.map((f) => finalOf(f) || f);
    let target;
    if (route.view === "sample") target = sampleHref(now[0], route.key, route.epoch);
    else if (route.view === "log") target = logHref(now[0]);
    else if (route.view === "compare-sample") target = compareSampleHref(now, route.key, route.epoch);
    else target = compareHref(now);
    location.replace(target);
    return true;
  }

  const app = document.getElementById("app");
  const crumbs = document.getElementById("crumbs");
  const liveBadge = document.getElementById("live");
  let current = null; // the mounted view: {route, update()}

  function setCrumbs(items) {
    const nodes = [];
    items.forEach((item, i) => {
      if (i) nodes.push(el("span", { class: "sep", text: "/" }));
      nodes.push(item.href ? el("a", { href: item.href, text: item.text }) : el("span", { text: item.text }));
    });
    replace(crumbs, nodes);
  }

  function showError(message) {
    replace(app, el("div", { class: "error-banner", role: "alert", text: message }),
      el("p", {}, el("a", { href: "#/", text: "Back to the list of logs" })));
  }

  async function render() {
    const route = parseRoute();
    if (!store.loaded) {
      try { await refreshLogs(); } catch (e) { showError("Cannot load the list of logs: " + e.message); return; }
      connectEvents();
    }
    if (followFinal(route)) return;
    current = null;
    window.scrollTo(0, 0);
    pinned = new Set(routeFiles(route));
    if (route.view === "log") current = mountLog(route);
    else if (route.view === "sample") current = mountSample(route);
    else if (route.view === "compare") current = compare.mountCompare(route);
    else if (route.view === "compare-sample") current = compare.mountCompareSample(route);
    else current = mountList(route);
  }

  window.addEventListener("hashchange", render);

  // ---------------------------------------------------------------- live updates

  let events = null;

  function connectEvents() {
    if (!store.live || events || typeof EventSource === "undefined") return;
    events = new EventSource("api/events");
    liveBadge.hidden = false;
    events.onopen = () => liveBadge.classList.remove("off");
    events.onerror = () => liveBadge.classList.add("off");
    events.onmessage = (message) => {
      let change;
      try { change = JSON.parse(message.data); } catch (e) { return; }
      onChange(change);
    };
  }

  async function onChange(change) {
    const files = change.files || [];
    const live = change.live || [];
    const liveOnly = !change.hello && !files.length && live.length > 0;
    if (!liveOnly) {
      try {
        await refreshLogs();
      } catch (e) {
        return;
      }
    }
    const route = current ? current.route : parseRoute();
    if (followFinal(route)) return;
    const jobs = [];
    for (const file of routeFiles(route)) {
      const data = store.data.get(file);
      if (!data) continue;
      if (change.hello || files.includes(file)) {
        jobs.push(data.refresh());
        // a batch recorded in a journal changes its file: the log page lists them anew
        if (route.view === "log" && hasBatches(file)) jobs.push(data.refreshBatches());
      }
      if (!hasBatches(file)) data.batches = null;
      if (!isRunning(file)) data.clearLive();
      else if (route.view.startsWith("compare")) continue; // compared: finished rows only
      else if (change.hello || live.includes(file)) jobs.push(data.refreshLive());
    }
    await Promise.allSettled(jobs); // a failure shows on the next load
    if (!current) return;
    if (liveOnly) {
      if (current.live) current.live(); // only the live text changed: nothing else to redraw
    } else if (current.update) current.update();
  }

  // ---------------------------------------------------------------- sortable tables

  // headers: [{key, label, numeric}], state: {sort, dir}; onSort(key) re-renders.
  function sortableHead(columns, state, onSort) {
    return el("thead", {}, el("tr", {}, columns.map((col) => {
      const active = state.sort === col.key;
      const arrow = active ? (state.dir > 0 ? "▲" : "▼") : "";
      const label = el("button", { class: "sort", type: "button", onclick: () => onSort(col.key) },
        col.label, el("span", { class: "arrow", text: arrow }));
      return el("th", {
        class: col.numeric ? "num" : "",
        "aria-sort": active ? (state.dir > 0 ? "ascending" : "descending") : "none",
        scope: "col",
      }, col.sortable === false ? col.label : label);
    })));
  }

  function compareValues(a, b) {
    const an = a === null || a === undefined || (typeof a === "number" && Number.isNaN(a));
    const bn = b === null || b === undefined || (typeof b === "number" && Number.isNaN(b));
    if (an || bn) return an === bn ? 0 : an ? 1 : -1; // missing values last
    if (typeof a === "number" && typeof b === "number") return a - b;
    if (typeof a === "boolean" && typeof b === "boolean") return Number(a) - Number(b);
    return String(a).localeCompare(String(b), undefined, { numeric: true });
  }

  function toggleSort(state, key, defaultDir) {
    if (state.sort === key) state.dir = -state.dir;
    else {
      state.sort = key;
      state.dir = defaultDir || 1;
    }
  }

  // ---------------------------------------------------------------- page 1: the list of logs

  const LIST_COLUMNS = [
    { key: "pick", label: "", sortable: false, value: () => null },
    { key: "task", label: "Task", value: (e) => e.task },
    { key: "model", label: "Model", value: (e) => e.model },
    { key: "status", label: "Status", value: (e) => e.status },
    { key: "metrics", label: "Metrics", value: firstMetric },
    { key: "samples", label: "Samples", value: (e) => e.samples, numeric: true },
    { key: "cost", label: "Cost", value: (e) => e.cost, numeric: true },
    { key: "date", label: "Date", value: (e) => parseTime(e.started || e.created), numeric: true },
  ];
  const listState = { sort: "date", dir: -1, picked: [] };

  // What the picked logs can be: compared (two or more, one task) or not, and why.
  function pickedState() {
    const picked = listState.picked.map((f) => store.byFile.get(f)).filter(Boolean);
    const tasks = new Set(picked.map((e) => e.task));
    if (picked.length < 2) {
      return { ok: false, text: picked.length ? "Pick one more log of " + picked[0].task + " to compare." : "Pick two or more logs of one task to compare them." };
    }
    if (tasks.size > 1) return { ok: false, text: "The picked logs are of different tasks (" + Array.from(tasks).join(", ") + "): pick logs of one task." };
    return { ok: true, text: plural(picked.length, "log") + " of " + picked[0].task + " picked." };
  }

  function mountList(route) {
    setCrumbs([{ text: "Logs" }]);
    const table = el("table", { id: "logs-table" });
    const summary = el("p", { class: "muted small" });
    const problems = el("div");
    const hint = el("span", { class: "muted small", id: "compare-hint" });
    const compareButton = el("button", {
      class: "btn", type: "button", id: "compare-picked", text: "Compare",
      onclick: () => { if (pickedState().ok) location.hash = compareHref(listState.picked); },
    });
    replace(app, el("section", { class: "panel" },
      el("div", { class: "head" }, el("div", { class: "grow" }, el("h1", { text: "Logs" }), summary),
        el("div", { class: "compare-pick" }, hint, compareButton)),
      el("div", { class: "table-wrap" }, table)), problems);

    function updatePicked() {
      const state = pickedState();
      hint.textContent = state.text;
      compareButton.disabled = !state.ok;
    }

    function pick(file, on) {
      listState.picked = listState.picked.filter((f) => f !== file);
      if (on) listState.picked.push(file);
      updatePicked();
    }

    function update() {
      listState.picked = listState.picked.filter((f) => store.byFile.has(f));
      const column = LIST_COLUMNS.find((c) => c.key === listState.sort) || LIST_COLUMNS[0];
      const logs = store.logs.slice().sort((a, b) => {
        const c = compareValues(column.value(a), column.value(b));
        return c === 0 ? compareValues(a.file, b.file) : listState.dir * c;
      });
      summary.textContent = plural(logs.length, "log");
      const body = el("tbody", {}, logs.map((e) => el("tr", {
        class: "clickable log-row", "data-file": e.file,
        onclick: (event) => { if (!event.target.closest("a, .pick")) location.hash = logHref(e.file); },
      },
      el("td", { class: "pick" }, el("input", {
        type: "checkbox", class: "pick-log", "aria-label": "Pick " + e.task + " · " + e.model + " to compare",
        checked: listState.picked.includes(e.file), onchange: (event) => pick(e.file, event.target.checked),
      })),
      el("td", {}, el("a", { href: logHref(e.file), class: "task-link", text: e.task }),
        el("div", { class: "muted small cell-clip", title: e.file, text: e.file })),
      el("td", { class: "nowrap", text: e.model }),
      el("td", {}, statusBadge(e.status)),
      el("td", { text: metricsText(e.metrics) }),
      el("td", { class: "num", text: fmtInt(e.samples) }),
      el("td", { class: "num", text: fmtCost(e.cost) }),
      el("td", { class: "nowrap", text: fmtDate(e.started || e.created) }))));
      if (!logs.length) add(body, el("tr", {}, el("td", { colspan: LIST_COLUMNS.length, class: "empty", text: "No logs in this directory yet." })));
      replace(table, sortableHead(LIST_COLUMNS, listState, (key) => {
        toggleSort(listState, key, key === "date" || key === "cost" || key === "samples" ? -1 : 1);
        update();
      }), body);
      replace(problems, store.errors.length ? el("section", { class: "panel" },
        el("h2", { text: "Logs that could not be read" }),
        el("ul", {}, store.errors.map((err) => el("li", {}, el("code", { text: err.file }), " — ", err.message)))) : null);
      updatePicked();
    }
    update();
    return { route, update };
  }

  // ---------------------------------------------------------------- page 2: one log

  const PAGE_SIZE = 100;
  const SAMPLE_COLUMNS = [
    { key: "id", label: "ID" },
    { key: "epoch", label: "Epoch", numeric: true },
    { key: "input", label: "Input" },
    { key: "target", label: "Target" },
    { key: "result", label: "Result" },
    { key: "score", label: "Score" },
    { key: "tokens", label: "Tokens", numeric: true },
    { key: "time", label: "Time", numeric: true },
    { key: "error", label: "Error" },
  ];

  function tableState(file) {
    let state = store.views.get(file);
    if (!state) {
      state = { q: "", score: "", sort: null, dir: 1, page: 0, cache: null, cacheKey: "" };
      store.views.set(file, state);
    }
    return state;
  }

  function scoreKey(value) {
    if (value === null || value === undefined) return "__none";
    return typeof value + ":" + String(value);
  }

  function haystack(row) {
    if (row._hay === undefined) {
      row._hay = [row.id, row.input, row.target, row.result, row.error || ""].join("\n").toLowerCase();
    }
    return row._hay;
  }

  // The rows after filter and sort, cached until rows, filter or sort change.
  function visibleRows(data, state) {
    const key = [data.revision, state.q, state.score, state.sort, state.dir].join("\u0000");
    if (state.cache && state.cacheKey === key) return state.cache;
    const q = state.q.trim().toLowerCase();
    let rows = data.rows;
    if (state.score === "__error") rows = rows.filter((r) => r.error);
    else if (state.score) rows = rows.filter((r) => scoreKey(r.score) === state.score);
    if (q) rows = rows.filter((r) => haystack(r).includes(q));
    if (state.sort) {
      const k = state.sort;
      const dir = state.dir;
      rows = rows.slice().sort((a, b) => dir * compareValues(k === "error" ? (a.error ? 1 : 0) : a[k], k === "error" ? (b.error ? 1 : 0) : b[k]));
    }
    state.cache = rows;
    state.cacheKey = key;
    return rows;
  }

  const GRADE_ORDER = { C: 0, P: 1, I: 2 };

  // Bars of the score distribution: categories for grades and few values, bins for many numbers.
  function distribution(rows) {
    const counts = new Map();
    let unscored = 0;
    const numbers = [];
    let allNumbers = true;
    for (const row of rows) {
      const v = row.score;
      if (v === null || v === undefined) { unscored += 1; continue; }
      if (typeof v === "number") numbers.push(v);
      else allNumbers = false;
      const k = scoreKey(v);
      const entry = counts.get(k);
      if (entry) entry.count += 1; else counts.set(k, { key: k, label: scoreText(v), value: v, count: 1 });
    }
    let bars;
    if (allNumbers && counts.size > 12) {
      const min = Math.min(...numbers);
      const max = Math.max(...numbers);
      const bins = 10;
      const width = (max - min) / bins || 1;
      bars = Array.from({ length: bins }, (_, i) => ({
        key: null, label: fmtNum(min + i * width), count: 0, value: min + i * width,
      }));
      for (const v of numbers) bars[Math.min(bins - 1, Math.floor((v - min) / width))].count += 1;
    } else {
      bars = Array.from(counts.values()).sort((a, b) => {
        const ga = GRADE_ORDER[a.value];
        const gb = GRADE_ORDER[b.value];
        if (ga !== undefined || gb !== undefined) return (ga ?? 9) - (gb ?? 9);
        return compareValues(a.value, b.value);
      });
    }
    if (unscored) bars.push({ key: "__none", label: "unscored", value: null, count: unscored });
    return bars;
  }

  function chart(rows, onPick) {
    const bars = distribution(rows);
    if (!bars.length) return el("p", { class: "muted", text: "No scores yet." });
    const W = 360;
    const H = 190;
    const top = 18;
    const bottom = 26;
    const gap = 8;
    const max = Math.max(...bars.map((b) => b.count));
    const bw = Math.min(56, (W - gap * (bars.length + 1)) / bars.length);
    const offset = (W - (bw + gap) * bars.length + gap) / 2;
    const plot = H - top - bottom;
    const root = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": "Score distribution" });
    add(root, svg("line", { class: "axis", x1: 0, x2: W, y1: H - bottom, y2: H - bottom }));
    bars.forEach((bar, i) => {
      const h = max ? Math.max(1, (bar.count / max) * plot) : 0;
      const x = offset + i * (bw + gap);
      const y = H - bottom - h;
      const grade = bar.value === null ? "grade-none" : gradeClass(bar.value);
      const rect = svg("rect", { class: "bar " + grade, x, y, width: bw, height: h, rx: 3, "data-score": bar.label },
        svg("title", { text: bar.label + ": " + bar.count }));
      if (bar.key && onPick) rect.addEventListener("click", () => onPick(bar.key));
      add(root, rect,
        svg("text", { class: "count", x: x + bw / 2, y: y - 4, "text-anchor": "middle", text: fmtInt(bar.count) }),
        svg("text", { x: x + bw / 2, y: H - bottom + 16, "text-anchor": "middle", text: bar.label.length > 10 ? bar.label.slice(0, 9) + "…" : bar.label }));
    });
    return root;
  }

  const TOKEN_KEYS = ["input_tokens", "cached_input_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens"];
  // A fresh running sum of each token column.
  const noTokens = () => Object.fromEntries(TOKEN_KEYS.map((k) => [k, 0]));

  // Per role, the usage of the samples whose calls of that role the cache answered, all of
  // them (`cached` in their rows).
  function cachedUsage(samples) {
    const parts = {};
    for (const s of samples) {
      for (const [role, u] of Object.entries(s.cached || {})) {
        const part = parts[role] || (parts[role] = { requests: 0, cost: 0, ...noTokens() });
        part.requests += u.requests || 0;
        for (const k of TOKEN_KEYS) part[k] += u[k] || 0;
        part.cost = part.cost === null || u.cost === null || u.cost === undefined ? null : part.cost + u.cost;
      }
    }
    return parts;
  }

  // A header's cost row split into its live part and the part the cache answered (`part`),
  // as `read_log(...).get_cost()` splits it: one row, cached, when nothing else is left.
  function splitCached(row, part) {
    const live = { ...row, cached: false, requests: row.requests === null ? null : row.requests - part.requests };
    for (const k of TOKEN_KEYS) live[k] = (row[k] || 0) - part[k];
    live.cost = row.cost === null || row.cost === undefined || part.cost === null ? null : row.cost - part.cost;
    const left = TOKEN_KEYS.some((k) => live[k]) || live.requests > 0;
    return left ? [live, { ...row, ...part, cached: true }] : [{ ...row, cached: true }];
  }

  // The cost table; its Requests, when the header has none, counted over the sample rows
  // (`requests` by role in each), as `task.get_cost()` counts them, and the calls the cache
  // answered in rows of their own (marked "cached").
  function costTable(entry, samples) {
    const counted = {};
    for (const s of samples) for (const [role, n] of Object.entries(s.requests || {})) counted[role] = (counted[role] || 0) + n;
    const cached = cachedUsage(samples);
    const table = entry.cost_table || [];
    const once = (role) => table.filter((r) => r.role === role).length === 1;  // one model in the role
    const rows = table.flatMap((r) => {
      const single = Boolean(samples.length) && once(r.role);
      const row = r.requests === null || r.requests === undefined ? { ...r, requests: single ? counted[r.role] || 0 : null } : r;
      const known = r.cached === true || r.cached === false;  // a full read already split it
      return single && !known && cached[r.role] ? splitCached(row, cached[r.role]) : [row];
    });
    if (!rows.length) return el("p", { class: "muted", text: "No token usage recorded." });
    const total = rows.reduce((acc, r) => {
      for (const k of TOKEN_KEYS) acc[k] += r[k] || 0;
      if (r.cost !== null && r.cost !== undefined) acc.cost = (acc.cost || 0) + r.cost;
      return acc;
    }, { ...noTokens(), cost: null });
    const num = (v) => el("td", { class: "num", text: fmtInt(v) });
    // Cache writes (Anthropic's prompt cache) get a column when some call made them.
    const writes = total.cache_write_tokens > 0;
    const tokens = (r) => [num(r.input_tokens), num(r.cached_input_tokens),
      writes ? num(r.cache_write_tokens) : null, num(r.output_tokens), num(r.reasoning_tokens)];
    const heads = ["Role", "Model", "Requests", "Input", "Cached input", ...(writes ? ["Cache write"] : []), "Output", "Reasoning", "Cost"];
    return el("table", { id: "cost-table" },
      el("thead", {}, el("tr", {}, heads.map((h, i) =>
        el("th", { class: i >= 2 ? "num" : "", text: h })))),
      el("tbody", {}, rows.map((r) => el("tr", { class: r.cached ? "cost-row cost-cached" : "cost-row", "data-cached": String(Boolean(r.cached)) },
        el("td", { text: r.role }),
        el("td", { class: "nowrap" }, [r.provider, r.model].filter(Boolean).join(" / ") || "—",
          r.cached ? el("span", { class: "badge cached", title: "Answered from the cache of replies: nothing was sent", text: "cached" }) : null),
        num(r.requests), ...tokens(r),
        el("td", { class: "num", text: fmtCost(r.cost) })))),
      rows.length > 1 ? el("tfoot", {}, el("tr", {}, el("td", { text: "Total" }), el("td"), el("td"),
        ...tokens(total),
        el("td", { class: "num", text: fmtCost(total.cost) }))) : null);
  }

  // A provider batch's state: "pending" (submitted, not ended), "ended" (done, or never
  // submitted), or "waiting" (being submitted). Pending first, then waiting, then ended.
  const BATCH_ORDER = { pending: 0, waiting: 1, ended: 2 };
  const BATCH_ROWS = 50;

  function batchState(b) {
    if (b.pending) return "pending";
    return b.ended === null || b.ended === undefined ? "waiting" : "ended";
  }

  function batchStatus(b) {
    const state = batchState(b);
    const text = state === "ended" ? b.status || "ended" : state === "pending" ? "pending" : "submitting";
    const bad = state === "ended" && (!b.id || /fail|expire|cancel|error/i.test(text));
    const cls = state === "pending" ? "status-started" : bad ? "status-error" : state === "ended" ? "status-success" : "";
    const counts = Object.entries(b.counts || {}).map(([k, n]) => k + " " + fmtInt(n)).join(" · ");
    return [el("span", { class: "badge batch-status " + cls, text }),
      counts ? el("div", { class: "muted small", text: counts }) : null];
  }

  // The "Batches" panel's contents: how many are pending / ended, and a compact table.
  function batchesPanel(batches) {
    const rows = batches.map((b, i) => ({ b, i, state: batchState(b) }))
      .sort((x, y) => BATCH_ORDER[x.state] - BATCH_ORDER[y.state] || x.i - y.i);
    const n = { pending: 0, waiting: 0, ended: 0 };
    for (const row of rows) n[row.state] += 1;
    const summary = [fmtInt(n.pending) + " pending", fmtInt(n.ended) + " ended"];
    if (n.waiting) summary.push(fmtInt(n.waiting) + " submitting");
    const shown = rows.slice(0, BATCH_ROWS);
    return [
      el("h2", { text: "Batches" }),
      el("p", { class: "muted small", id: "batch-count", text: summary.join(" · ") }),
      el("div", { class: "table-wrap" }, el("table", { id: "batches-table" },
        el("thead", {}, el("tr", {}, ["Provider / model", "Provider id", "Requests", "Submitted", "Status"].map((h, i) =>
          el("th", { class: i === 2 ? "num" : "", text: h })))),
        el("tbody", {}, shown.map(({ b, state }) => el("tr", {
          class: "batch-row batch-" + state, "data-key": b.key, "data-state": state,
        },
        el("td", { class: "nowrap", text: [b.provider, b.model].filter(Boolean).join(" / ") || "—" }),
        el("td", { class: "mono small cell-clip", title: b.id || b.key, text: b.id || "—" }),
        el("td", { class: "num", text: fmtInt(b.requests) }),
        el("td", { class: "nowrap", title: b.ended ? "ended " + fmtUnix(b.ended) : null, text: fmtUnix(b.submitted) }),
        el("td", {}, batchStatus(b))))))),
      rows.length > shown.length
        ? el("p", { class: "muted small", text: "and " + plural(rows.length - shown.length, "more batch", "more batches") }) : null,
    ];
  }

  function timing(entry, rows) {
    const start = parseTime(entry.started);
    const end = parseTime(entry.completed);
    const times = rows.map((r) => r.time).filter((t) => typeof t === "number").sort((a, b) => a - b);
    const mean = times.length ? times.reduce((a, b) => a + b, 0) / times.length : null;
    const median = times.length ? times[Math.floor((times.length - 1) / 2)] : null;
    return kv([
      ["Created", fmtDate(entry.created)],
      ["Started", entry.started ? fmtDate(entry.started) : null],
      ["Completed", entry.completed ? fmtDate(entry.completed) : null],
      ["Duration", !Number.isNaN(start) && !Number.isNaN(end) ? fmtSeconds((end - start) / 1000) : null],
      ["Sample time (mean)", mean !== null ? fmtSeconds(mean) : null],
      ["Sample time (median)", median !== null ? fmtSeconds(median) : null],
      ["Sample time (max)", times.length ? fmtSeconds(times[times.length - 1]) : null],
    ]);
  }

  const COMPARE_AT_MOST = 4; // other runs a log page offers to compare with (the newest)

  // "compare with 2 other runs": this log beside the newest other logs of its task.
  function compareLink(entry) {
    const others = store.logs.filter((e) => e.task === entry.task && e.file !== entry.file)
      .sort((a, b) => compareValues(parseTime(b.started || b.created), parseTime(a.started || a.created)))
      .slice(0, COMPARE_AT_MOST);
    if (!others.length) return null;
    return el("a", { id: "compare-with", href: compareHref([entry.file, ...others.map((e) => e.file)]),
      text: "compare with " + plural(others.length, "other run") });
  }

  // A search box over a table: its text goes to `state.q` (and back to the first page)
  // a moment after the typing stops, then `onSearch()` redraws.
  function searchBox(id, placeholder, state, onSearch) {
    const box = el("input", { type: "search", id, placeholder, value: state.q, "aria-label": "Search samples" });
    let debounce = null;
    box.addEventListener("input", () => {
      clearTimeout(debounce);
      debounce = setTimeout(() => { state.q = box.value; state.page = 0; onSearch(); }, 120);
    });
    return box;
  }

  function mountLog(route) {
    const file = route.file;
    const entry0 = store.byFile.get(file);
    if (!entry0) {
      setCrumbs([{ text: "Logs", href: "#/" }, { text: file }]);
      showError("No log named '" + file + "' in this directory.");
      return { route };
    }
    const data = logData(file);
    const state = tableState(file);
    const head = el("div", { class: "head" });
    const cards = el("div", { class: "cards", id: "log-cards" });
    const batchesBox = el("section", { class: "panel", id: "batches", hidden: true });
    const chartBox = el("div", { class: "chart", id: "score-chart" });
    const costBox = el("div", { class: "table-wrap" });
    const timingBox = el("div");
    const count = el("span", { class: "muted small", id: "sample-count" });
    const search = searchBox("sample-search", "Search id, input, target, result…", state, () => updateTable());
    const scoreSelect = el("select", { id: "score-filter", "aria-label": "Filter by score" });
    const table = el("table", { id: "samples-table" });
    const pager = el("div", { class: "pager" });
    scoreSelect.addEventListener("change", () => { state.score = scoreSelect.value; state.page = 0; updateTable(); });

    replace(app, head, cards, batchesBox,
      el("div", { class: "grid log-grid" },
        el("section", { class: "panel" }, el("h2", { text: "Score distribution" }), chartBox),
        el("section", { class: "panel" }, el("h2", { text: "Timing" }), timingBox),
        el("section", { class: "panel span-all" }, el("h2", { text: "Cost by role and model" }), costBox)),
      el("section", { class: "panel" }, el("h2", { text: "Samples" }),
        el("div", { class: "controls" }, search, scoreSelect, count),
        el("div", { class: "table-wrap" }, table), pager));

    function updateHead() {
      const entry = store.byFile.get(file) || entry0;
      setCrumbs([{ text: "Logs", href: "#/" }, { text: entry.task }]);
      replace(head, el("div", { class: "grow" },
        el("h1", { id: "log-title", text: entry.task }),
        el("div", { class: "meta" }, el("span", { text: entry.model }), statusBadge(entry.status),
          el("span", { class: "mono small", text: entry.file }),
          el("a", { href: "logs/" + entry.file.split("/").map(encodeURIComponent).join("/"), download: entry.name, text: "download" }),
          compareLink(entry))),
        entry.error ? el("div", { class: "error-banner", role: "alert", text: "The run failed: " + entry.error }) : null);
      const metricCards = [];
      for (const score of entry.scores || []) {
        const prefix = entry.scores.length > 1 ? score.name + " · " : "";
        for (const [name, value] of Object.entries(score.metrics || {})) {
          metricCards.push(card(prefix + name, fmtNum(value), "metric",
            metricNote((score.stats || {})[name])));
        }
        const fixed = score.corrected;
        if (fixed) {  // the mean corrected by human grades (Task(human=)), beside the judge's
          metricCards.push(card(prefix + "corrected by " + plural(fixed.human_grades, "human grade"),
            fmtNum(fixed.value), "metric corrected", metricNote({ ...fixed, clusters: undefined })));
        }
      }
      replace(cards, metricCards,
        card("Samples", fmtInt(data.rows.length || entry.samples) + (entry.running ? " …" : "")),
        card("Errors", fmtInt(data.rows.filter((r) => r.error).length)),
        card("Tokens", fmtInt(entry.tokens)),
        card("Cost", fmtCost(entry.cost)));
      replace(costBox, costTable(entry, data.rows));
      replace(timingBox, timing(entry, data.rows));
      replace(chartBox, chart(data.rows, (key) => {
        state.score = state.score === key ? "" : key;
        state.page = 0;
        updateTable();
      }));
    }

    // The run's provider batches: shown only when it has any.
    function updateBatches() {
      const batches = hasBatches(file) && data.batches ? data.batches.batches || [] : [];
      batchesBox.hidden = !batches.length;
      if (batches.length) replace(batchesBox, batchesPanel(batches));
      else clear(batchesBox);
    }

    function updateFilterOptions() {
      const seen = new Map();
      for (const row of data.rows) {
        const k = scoreKey(row.score);
        if (!seen.has(k)) seen.set(k, row.score === null || row.score === undefined ? "unscored" : scoreText(row.score));
      }
      const options = [["", "All scores"], ...Array.from(seen.entries()).sort((a, b) => compareValues(a[1], b[1]))];
      if (data.rows.some((r) => r.error)) options.push(["__error", "Errors"]);
      replace(scoreSelect, options.map(([value, label]) => el("option", { value, text: label })));
      scoreSelect.value = options.some((o) => o[0] === state.score) ? state.score : "";
    }

    function updateTable() {
      updateFilterOptions();
      const rows = visibleRows(data, state);
      const pages = Math.max(1, Math.ceil(rows.length / PAGE_SIZE));
      state.page = Math.min(state.page, pages - 1);
      const first = state.page * PAGE_SIZE;
      const slice = rows.slice(first, first + PAGE_SIZE);
      const running = runningRows();
      count.textContent = (rows.length === data.rows.length
        ? plural(rows.length, "sample")
        : fmtInt(rows.length) + " of " + plural(data.rows.length, "sample"))
        + (running.length ? " · " + fmtInt(running.length) + " running" : "");
      const body = el("tbody", {}, running.map(liveRow), slice.map((r) => el("tr", {
        class: "clickable sample-row", "data-key": r.key, "data-epoch": r.epoch,
        onclick: () => { location.hash = sampleHref(file, r.key, r.epoch); },
      },
      el("td", { class: "nowrap" }, el("a", { href: sampleHref(file, r.key, r.epoch), text: String(r.id) })),
      el("td", { class: "num", text: r.epoch }),
      el("td", { class: "cell-clip cell-wide", title: r.input, text: r.input }),
      el("td", { class: "cell-clip", title: r.target, text: r.target }),
      el("td", { class: "cell-clip cell-wide", title: r.result, text: r.result }),
      el("td", { class: "nowrap" }, scoreBadge(r.score), Object.entries(r.more_scores || {}).map(
        ([name, value]) => el("span", { class: "more-score", title: name }, " ", scoreBadge(value)))),
      el("td", { class: "num", text: fmtInt(r.tokens) }),
      el("td", { class: "num", text: fmtSeconds(r.time) }),
      el("td", {}, r.error ? el("span", { class: "flag-error", title: r.error, text: "error" }) : null))));
      if (!slice.length && !running.length) {
        add(body, el("tr", {}, el("td", {
          colspan: SAMPLE_COLUMNS.length, class: "empty",
          text: data.loading && !data.rows.length ? "Loading samples…" : data.rows.length ? "No sample matches." : "No samples yet.",
        })));
      }
      replace(table, sortableHead(SAMPLE_COLUMNS, state, (key) => {
        toggleSort(state, key, key === "tokens" || key === "time" ? -1 : 1);
        state.page = 0;
        updateTable();
      }), body);
      const go = (page) => () => { state.page = page; updateTable(); };
      replace(pager,
        el("span", { class: "muted small", id: "page-info", text: rows.length ? "Rows " + fmtInt(first + 1) + "–" + fmtInt(first + slice.length) + " of " + fmtInt(rows.length) : "" }),
        el("button", { class: "btn", type: "button", disabled: state.page === 0, onclick: go(0), text: "« First" }),
        el("button", { class: "btn", type: "button", disabled: state.page === 0, onclick: go(state.page - 1), text: "‹ Prev", id: "page-prev" }),
        el("span", { class: "small", text: "Page " + fmtInt(state.page + 1) + " of " + fmtInt(pages) }),
        el("button", { class: "btn", type: "button", disabled: state.page >= pages - 1, onclick: go(state.page + 1), text: "Next ›", id: "page-next" }),
        el("button", { class: "btn", type: "button", disabled: state.page >= pages - 1, onclick: go(pages - 1), text: "Last »" }));
    }

    // The running samples the table lists first (on its first page, unless filtered by
    // score): each with the tail of the text its reply streams so far.
    function runningRows() {
      if (!isRunning(file) || state.page !== 0 || state.score) return [];
      const q = state.q.trim().toLowerCase();
      return data.liveRows().filter((e) => !q || [e.id, e.input, e.text].join("\n").toLowerCase().includes(q));
    }

    function liveRow(e) {
      const href = sampleHref(file, e.key, e.epoch);
      return el("tr", {
        class: "clickable live-row", "data-key": e.key, "data-epoch": e.epoch,
        onclick: () => { location.hash = href; },
      },
      el("td", { class: "nowrap" }, el("a", { href, text: String(e.id) })),
      el("td", { class: "num", text: e.epoch }),
      el("td", { class: "cell-clip cell-wide", title: e.input, text: e.input }),
      el("td", { class: "muted", text: "—" }),
      el("td", { class: "cell-wide live-preview" + (e.finishing ? "" : " streaming"), text: textTail(e.text, e.chars) }),
      el("td", {}, el("span", {
        class: "badge status-started",
        text: e.finishing ? "finishing" : e.role === "scorer" ? "scoring…" : "solving…",
      })),
      el("td", { class: "num muted", text: "—" }),
      el("td", { class: "num muted", text: "—" }),
      el("td"));
    }

    function update() {
      updateHead();
      updateBatches();
      updateTable();
    }

    update();
    if (hasBatches(file)) data.refreshBatches().then(updateBatches, () => { /* shown on the next event */ });
    data.refresh().then(update, (e) => {
      replace(table, el("tbody", {}, el("tr", {}, el("td", { class: "error-banner", text: "Cannot load the samples: " + e.message }))));
    });
    if (isRunning(file)) data.refreshLive().then(updateTable, () => { /* shown on the next event */ });
    return { route, update, live: updateTable };
  }

  // The end of a streamed text, one line, as a table cell shows it.
  const PREVIEW_CHARS = 160;

  function textTail(text, chars) {
    const flat = String(text || "").replace(/\s+/g, " ");
    if (flat.length <= PREVIEW_CHARS && (chars || 0) <= String(text || "").length) return flat;
    return "…" + flat.slice(-PREVIEW_CHARS);
  }

  // ---------------------------------------------------------------- page 3: one sample

  function resolver(sample) {
    const attachments = sample.attachments || {};
    return (value) => {
      if (typeof value === "string" && value.startsWith("attachment://")) {
        const found = attachments[value.slice("attachment://".length)];
        return found === undefined ? value : found;
      }
      return value;
    };
  }

  const IMAGE_URI = /^data:image\/(png|jpe?g|gif|webp|bmp|svg\+xml);base64,/i;

  function image(src) {
    if (typeof src === "string" && IMAGE_URI.test(src)) {
      return el("img", { class: "msg-image", src, alt: "Image from the log" });
    }
    return el("div", { class: "muted small", text: "[image not shown: only embedded data: images are displayed] " + String(src).slice(0, 200) });
  }

  function textBlock(text) {
    return el("div", { class: "text", text: text === null || text === undefined ? "" : String(text) });
  }

  function contentBlocks(content, att) {
    content = att(content);
    if (content === null || content === undefined) return [];
    if (typeof content === "string") return [textBlock(content)];
    if (!Array.isArray(content)) return [json(content)];
    return content.map((block) => {
      if (!block || typeof block !== "object") return textBlock(block);
      switch (block.type) {
        case "text": return textBlock(att(block.text));
        case "reasoning": return el("details", {}, el("summary", { text: "Reasoning" }),
          textBlock(block.redacted ? "(redacted)" : att(block.reasoning)));
        case "image": return image(att(block.image));
        case "tool_use": return el("div", { class: "tool-call" },
          el("span", { class: "fn", text: (block.name || "tool") + " (" + (block.tool_type || "tool use") + ")" }),
          json({ arguments: block.arguments, result: block.result }));
        default: return el("details", {}, el("summary", { text: block.type || "content" }), json(block));
      }
    });
  }

  // `cached`: the ids of the replies the cache answered, each with where it came from.
  function renderMessage(message, att, cached) {
    const role = ["system", "user", "assistant", "tool"].includes(message.role) ? message.role : "other";
    const label = [message.role || "message"];
    if (message.model) label.push(message.model);
    if (message.role === "tool" && message.function) label.push(message.function);
    const fromCache = role === "assistant" && cached && message.id && cached.has(message.id);
    const box = el("div", { class: "message role-" + role + (fromCache ? " from-cache" : "") },
      el("div", { class: "message-role", text: label.join(" · ") }),
      fromCache ? el("div", { class: "cached-note" }, cachedBadge(), " ", cachedOrigin(cached.get(message.id))) : null,
      contentBlocks(message.content, att));
    for (const call of message.tool_calls || []) {
      add(box, el("div", { class: "tool-call" },
        el("span", { class: "muted small", text: "tool call " }),
        el("code", { class: "fn", text: call.function }),
        call.id ? el("span", { class: "muted small", text: " · " + call.id }) : null,
        json(call.arguments || {}),
        call.parse_error ? el("div", { class: "tool-error", text: call.parse_error }) : null));
    }
    if (message.error) {
      add(box, el("div", { class: "tool-error", text: "Tool error: " + (message.error.message || JSON.stringify(message.error)) }));
    }
    return box;
  }

  function conversation(messages, att, cached) {
    return el("div", { class: "conversation" }, messages.map((m) => renderMessage(m, att, cached)));
  }

  // A sample id as the path segment the API names it by (`paths.sample_key` in Python).
  function sampleKey(id) {
    if (typeof id === "number") return String(id);
    const text = String(id);
    if (/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$/.test(text) && !/^-?[0-9]{1,30}$/.test(text)) return text;
    let binary = "";
    for (const byte of new TextEncoder().encode(text)) binary += String.fromCharCode(byte);
    return "~" + btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function cachedBadge() {
    return el("span", { class: "badge cached", title: "Answered from the cache of replies: nothing was sent", text: "cached" });
  }

  // Where a cached reply came from (a model event's `metadata.cached_from`): the task,
  // sample and epoch it first answered and when, and its log, linked when this viewer has it.
  function cachedOrigin(from) {
    if (!from || typeof from !== "object") return el("span", { class: "cached-from muted small", text: "from an earlier call" });
    const known = (v) => v !== null && v !== undefined && v !== "";
    const said = [];
    if (known(from.task)) said.push("task " + from.task);
    if (known(from.sample)) said.push("sample " + from.sample);
    if (known(from.epoch)) said.push("epoch " + from.epoch);
    if (typeof from.at === "number") said.push(fmtUnix(from.at));
    const entry = known(from.log) ? store.logs.find((e) => e.name === from.log) : null;
    const epoch = Number.isInteger(from.epoch) ? from.epoch : 1;
    const log = !known(from.log) ? null
      : entry && known(from.sample) ? el("a", { href: sampleHref(entry.file, sampleKey(from.sample), epoch), text: String(from.log) })
        : el("span", { class: "mono", text: String(from.log) });
    return el("span", { class: "cached-from muted small" },
      "from " + (said.join(" · ") || "an earlier call"), log ? [" · ", log] : null);
  }

  // The ids of the replies the cache answered (its model events' output messages), each
  // with where it came from.
  function cachedReplies(events) {
    const found = new Map();
    for (const e of events) {
      if (!e || e.event !== "model" || e.cache !== "read") continue;
      const choice = e.output && Array.isArray(e.output.choices) ? e.output.choices[0] : null;
      const id = choice && choice.message ? choice.message.id : null;
      if (id) found.set(id, e.metadata ? e.metadata.cached_from : null);
    }
    return found;
  }

  // The sample's model calls (its model events): role, model, tokens, time; a call the
  // cache answered says so and where its reply came from.
  function modelCalls(events) {
    const calls = events.filter((e) => e && e.event === "model");
    if (!calls.length) return null;
    return el("section", { class: "panel", id: "model-calls" }, el("h2", { text: "Model calls" }),
      el("div", { class: "table-wrap" }, el("table", {},
        el("thead", {}, el("tr", {}, ["#", "Role", "Model", "Input", "Output", "Time", ""].map((h, i) =>
          el("th", { class: i === 0 || (i >= 3 && i <= 5) ? "num" : "", text: h })))),
        el("tbody", {}, calls.map((e, i) => {
          const usage = (e.output && e.output.usage) || {};
          const cached = e.cache === "read";
          return el("tr", { class: "model-call" + (cached ? " call-cached" : ""), "data-cache": e.cache || "" },
            el("td", { class: "num", text: i + 1 }),
            el("td", { text: e.role || "solver" }),
            el("td", { class: "nowrap", text: e.model || "—" }),
            el("td", { class: "num", text: fmtInt(usage.input_tokens) }),
            el("td", { class: "num", text: fmtInt(usage.output_tokens) }),
            el("td", { class: "num nowrap", text: typeof e.working_time === "number" ? fmtSeconds(e.working_time) : "—" }),
            el("td", {},
              cached ? [cachedBadge(), " ", cachedOrigin(e.metadata ? e.metadata.cached_from : null)] : null,
              e.cache === "write" ? el("span", { class: "muted small", text: "sent; reply kept in the cache" }) : null,
              e.config && e.config.batch ? [" ", el("span", { class: "badge", text: "batch" })] : null,
              e.retries ? el("span", { class: "muted small", text: " " + plural(e.retries, "retry", "retries") }) : null,
              e.error ? [" ", el("span", { class: "flag-error", title: String(e.error), text: "error" })] : null));
        })))));
  }

  function usageTable(title, usage) {
    const entries = Object.entries(usage || {});
    if (!entries.length) return null;
    const num = (v) => el("td", { class: "num", text: fmtInt(v) });
    return [el("h3", { text: title }), el("table", { class: "usage-table" },
      el("thead", {}, el("tr", {}, ["", "Input", "Cache write", "Cache read", "Output", "Reasoning", "Total", "Cost"].map((h, i) =>
        el("th", { class: i ? "num" : "", text: h })))),
      el("tbody", {}, entries.map(([name, u]) => el("tr", {}, el("td", { text: name }),
        num(u.input_tokens), num(u.input_tokens_cache_write ?? u.cache_creation_input_tokens),
        num(u.input_tokens_cache_read ?? u.cache_read_input_tokens), num(u.output_tokens), num(u.reasoning_tokens),
        num(u.total_tokens), el("td", { class: "num", text: fmtCost(u.total_cost) })))))];
  }

  function retries(sample) {
    let events = [];
    if (Array.isArray(sample.events)) events = sample.events;
    const withRetries = events.filter((e) => e && e.event === "model" && e.retries);
    const items = withRetries.map((e) => el("li", {},
      el("strong", { text: plural(e.retries, "retry", "retries") }),
      " on ", el("code", { text: e.model || "model" }),
      e.timestamp ? el("span", { class: "muted", text: " at " + fmtDate(e.timestamp) }) : null));
    for (const previous of sample.error_retries || []) {
      items.push(el("li", {}, "An earlier attempt failed: ", el("code", { text: previous.message || JSON.stringify(previous) })));
    }
    return { count: withRetries.reduce((n, e) => n + e.retries, 0), items };
  }

  function eventCounts(sample) {
    const counts = {};
    for (const e of Array.isArray(sample.events) ? sample.events : []) {
      const kind = e && e.event ? String(e.event) : "?";
      counts[kind] = (counts[kind] || 0) + 1;
    }
    return counts;
  }

  function scoreSection(name, score, att, cached) {
    const metadata = Object.assign({}, score.metadata || {});
    const grading = Array.isArray(metadata.grading) ? metadata.grading : null;
    delete metadata.grading;
    return el("div", { class: "judge" },
      el("h3", {}, name),
      kv([
        ["Grade", el("span", { class: "grade" }, scoreBadge(score.value))],
        ["Answer", score.answer !== undefined && score.answer !== null ? el("span", { class: "text", text: att(score.answer) }) : null],
        ["Reason", score.reason || null],
      ]),
      score.explanation ? [el("h3", { text: "Explanation" }), el("div", { class: "explanation", text: att(score.explanation) })] : null,
      grading ? [el("h3", { text: "The judge's conversation" }), conversation(grading, att, cached)] : null,
      Object.keys(metadata).length ? el("details", {}, el("summary", { text: "Score metadata" }), json(metadata)) : null);
  }

  async function loadSampleList(file) {
    const data = logData(file);
    if (data.version === null) await data.refresh();
    const state = tableState(file);
    return visibleRows(data, state);
  }

  function mountSample(route) {
    const { file, key, epoch } = route;
    const entry = store.byFile.get(file);
    setCrumbs([{ text: "Logs", href: "#/" }, { text: entry ? entry.task : file, href: logHref(file) }, { text: "Sample " + key + " · epoch " + epoch }]);
    replace(app, el("p", { class: "muted", text: "Loading the sample…" }));
    const mounted = { route, update: null };
    const data = logData(file);
    const id = key + "/" + epoch;
    const url = logBase(file) + "/samples/" + encodeURIComponent(key) + "/" + epoch + ".json";

    function load() {
      mounted.update = null;
      mounted.live = null;
      // In a running log, a sample without a row is in flight: it shows its text so far.
      const known = isRunning(file) ? Promise.allSettled([loadSampleList(file), data.refreshLive()]) : null;
      Promise.resolve(known).then(() => {
        if (current !== mounted) return;
        if (known && isRunning(file) && !data.index.has(id)) {
          showLive();
          return;
        }
        Promise.all([getJSON(url), loadSampleList(file).catch(() => [])]).then(([sample, rows]) => {
          if (current === mounted) renderSample(route, sample, rows);
        }, (e) => {
          if (current === mounted) showError("Cannot load the sample: " + e.message);
        });
      });
    }

    function showLive() {
      const view = liveSampleView(route, data);
      const update = () => {
        if (current !== mounted) return;
        // Finished (its row came, or the run ended): shown as any finished sample.
        if (data.index.has(id) || !isRunning(file)) load();
        else view.update(data.liveEntry(id));
      };
      mounted.update = update;
      mounted.live = update;
      update();
    }

    load();
    return mounted;
  }

  // A sample in flight: its input and the text its current model call has streamed so far.
  function liveSampleView(route, data) {
    const { file, key, epoch } = route;
    const title = el("h1", { id: "sample-title", text: "Sample " + key + " · epoch " + epoch });
    const stage = el("span");
    const chars = el("span");
    const updated = el("span");
    const input = el("div", { class: "text" });
    const role = el("div", { class: "message-role" });
    const text = el("div", { class: "text streaming", id: "live-text" });
    const cut = el("div", { class: "muted small" });
    const waiting = el("p", { class: "muted", text: "Waiting for this sample's reply to stream…" });
    // Its transcript so far (an agent's spans, tool calls, sandbox actions), redrawn as it grows.
    const transcriptSlot = el("div", { id: "live-transcript" });
    const messages = el("div", { class: "conversation" },
      el("div", { class: "message role-user" }, el("div", { class: "message-role", text: "user · input" }), input),
      el("div", { class: "message role-assistant", id: "live-message" }, role, cut, text));
    replace(app,
      el("div", { class: "head" },
        el("div", { class: "grow" }, title,
          el("div", { class: "meta" }, el("a", { href: logHref(file), text: "← back to the log" }),
            el("span", { class: "badge status-started", id: "sample-running", text: "running" })))),
      el("div", { class: "cards" }, card("Stage", stage), card("Characters", chars), card("Last text", updated)),
      el("section", { class: "panel", id: "live-sample" }, el("h2", { text: "Conversation so far" }), waiting, messages),
      transcriptSlot);
    let shownEvents = null;
    return {
      update(entry) {
        waiting.hidden = Boolean(entry);
        messages.hidden = !entry;
        if (!entry) return;
        title.textContent = "Sample " + entry.id + " · epoch " + entry.epoch;
        stage.textContent = entry.role === "scorer" ? "scoring" : "solving";
        chars.textContent = fmtInt(entry.chars);
        updated.textContent = new Date(entry.updated * 1000).toLocaleTimeString();
        input.textContent = entry.input;
        role.textContent = (entry.role === "scorer" ? "the judge" : "assistant") + " · streaming";
        const hidden = (entry.chars || 0) - entry.text.length;
        cut.textContent = hidden > 0 ? "(the first " + plural(hidden, "character") + " are not shown)" : "";
        text.textContent = entry.text;
        text.classList.toggle("streaming", data.live.has(route.key + "/" + route.epoch));
        const events = entry.events || null;
        // (each fetch of the sidecar brings new objects: redrawn only when the events changed)
        const drawn = events ? events.length + ":" + JSON.stringify(events[events.length - 1]) : "";
        if (drawn !== shownEvents) {
          shownEvents = drawn;
          const panel = events ? transcripts.transcriptPanel(events, (value) => value) : null;
          replace(transcriptSlot, ...(panel ? [panel] : []));
        }
      },
    };
  }

  function renderSample(route, sample, rows) {
    const { file, key, epoch } = route;
    const att = resolver(sample);
    const at = rows.findIndex((r) => r.key === key && r.epoch === epoch);
    const prev = at > 0 ? rows[at - 1] : null;
    const next = at >= 0 && at < rows.length - 1 ? rows[at + 1] : null;
    const nav = (row, label, id) => el("button", {
      class: "btn", type: "button", id, disabled: !row, text: label,
      onclick: () => { if (row) location.hash = sampleHref(file, row.key, row.epoch); },
    });
    const scores = Object.entries(sample.scores || {});
    const firstScore = scores.length ? scores[0][1] : null;
    const retry = retries(sample);
    const totalTokens = Object.values(sample.model_usage || {}).reduce(
      (n, u) => n + (u.total_tokens || (u.input_tokens || 0) + (u.output_tokens || 0)), 0);
    const messages = Array.isArray(sample.messages) ? sample.messages : [];
    const events = Array.isArray(sample.events) ? sample.events : [];
    const cached = cachedReplies(events);
    let transcript;
    if (messages.length) transcript = conversation(messages, att, cached);
    else {
      const input = Array.isArray(sample.input) ? sample.input : [{ role: "user", content: sample.input }];
      const output = sample.output || {};
      const reply = output.completion || (output.choices && output.choices[0] && output.choices[0].message.content);
      transcript = conversation(reply ? [...input, { role: "assistant", content: reply }] : input, att);
    }
    const target = Array.isArray(sample.target) ? sample.target.join(" | ") : sample.target;
    const metadata = sample.metadata || {};
    const counts = eventCounts(sample);

    replace(app,
      el("div", { class: "head" },
        el("div", { class: "grow" }, el("h1", { id: "sample-title", text: "Sample " + sample.id + " · epoch " + sample.epoch }),
          el("div", { class: "meta" }, el("a", { href: logHref(file), text: "← back to the log" }),
            at >= 0 ? el("span", { text: fmtInt(at + 1) + " of " + fmtInt(rows.length) }) : null)),
        nav(prev, "‹ Previous", "sample-prev"), nav(next, "Next ›", "sample-next")),
      el("div", { class: "cards" },
        card("Score", firstScore ? scoreBadge(firstScore.value) : "—"),
        card("Target", el("span", { class: "small", text: target === undefined ? "—" : String(att(target)) })),
        card("Tokens", fmtInt(totalTokens)),
        card("Time", fmtSeconds(sample.total_time)),
        card("Retries", fmtInt(retry.count + (sample.error_retries || []).length)),
        sample.error ? card("Error", el("span", { class: "flag-error", text: "yes" })) : null,
        sample.limit && typeof sample.limit === "object"
          ? card("Limit", el("span", { class: "flag-error", id: "sample-limit", title: String(sample.limit.reason || ""), text: String(sample.limit.type) })) : null),
      sample.error ? el("section", { class: "panel", id: "sample-error" }, el("h2", { text: "Error" }),
        el("div", { class: "error-banner", text: sample.error.message || String(sample.error) }),
        sample.error.traceback ? el("details", { open: true }, el("summary", { text: "Traceback" }),
          el("pre", { class: "traceback", text: sample.error.traceback })) : null) : null,
      el("section", { class: "panel", id: "conversation" }, el("h2", { text: "Conversation" }), transcript),
      transcripts.transcriptPanel(events, att),
      scores.length ? el("section", { class: "panel", id: "scores" }, el("h2", { text: "Scoring" }),
        scores.map(([name, score]) => scoreSection(name, score, att, cached))) : null,
      modelCalls(events),
      el("div", { class: "grid" },
        el("section", { class: "panel", id: "usage" }, el("h2", { text: "Token usage" }),
          usageTable("By model", sample.model_usage) || el("p", { class: "muted", text: "No usage recorded." }),
          usageTable("By role", sample.role_usage)),
        el("section", { class: "panel", id: "timing" }, el("h2", { text: "Timing and retries" }),
          kv([
            ["Started", sample.started_at ? fmtDate(sample.started_at) : null],
            ["Completed", sample.completed_at ? fmtDate(sample.completed_at) : null],
            ["Total time", typeof sample.total_time === "number" ? fmtSeconds(sample.total_time) : null],
            ["Working time", typeof sample.working_time === "number" ? fmtSeconds(sample.working_time) : null],
            ["Events", Object.keys(counts).length ? Object.entries(counts).map(([k, n]) => k + " × " + n).join(", ") : null],
          ]),
          retry.items.length ? [el("h3", { text: "Retries" }), el("ul", { id: "retries" }, retry.items)] : el("p", { class: "muted small", text: "No retries." }))),
      el("section", { class: "panel", id: "metadata" }, el("h2", { text: "Metadata" }),
        Object.keys(metadata).length ? json(metadata) : el("p", { class: "muted", text: "No metadata." }),
        sample.store && Object.keys(sample.store).length ? [el("h3", { text: "Store" }), json(sample.store)] : null));
  }

  document.addEventListener("keydown", (event) => {
    if (event.target instanceof HTMLInputElement || event.target instanceof HTMLSelectElement) return;
    const id = event.key === "ArrowLeft" ? "sample-prev" : event.key === "ArrowRight" ? "sample-next" : null;
    const button = id && document.getElementById(id);
    if (button && !button.disabled) button.click();
  });

  // A sample's transcript (transcript.js): its spans, tool calls, sandbox actions, limit.
  const transcripts = window.vitalsTranscript({ el, json, plural, fmtInt, fmtSeconds, scoreBadge, contentBlocks });

  // The compare view (compare.js) draws with the same helpers and data.
  const compare = window.vitalsCompare({
    el, replace, card, metricNote, kv, plural, fmtInt, fmtNum, fmtCost, fmtSeconds, fmtDate,
    parseTime, scoreBadge, scoreKey, statusBadge, compareValues, store, logData, logHref,
    sampleHref, compareHref, compareSampleHref, setCrumbs, showError, getJSON, logBase,
    conversation, resolver, searchBox, isCurrent: (mounted) => current === mounted, PAGE_SIZE,
  });

  render();
})();
