// vitals-engine log viewer: the compare view, two or more logs of one task side by side.
//
// Loaded before app.js, which calls `vitalsCompare(ui)` with its helpers and mounts the
// views this returns. The rules of app.js hold here too: the DOM is built with
// createElement and textContent only, and every URL is relative.
"use strict";

window.vitalsCompare = function (ui) {
  const {
    el, replace, card, metricNote, kv, plural, fmtInt, fmtNum, fmtCost, fmtSeconds, fmtDate,
    parseTime, scoreBadge, scoreKey, statusBadge, compareValues, store, logData, logHref,
    sampleHref, compareHref, compareSampleHref, setCrumbs, showError, getJSON, logBase,
    conversation, resolver, searchBox, isCurrent, PAGE_SIZE,
  } = ui;
  const app = document.getElementById("app");

  // How good a score is, to say which run did better on a sample (null: no order known).
  function rank(value) {
    if (value === "C" || value === true) return 1;
    if (value === "P") return 0.5;
    if (value === "I" || value === false) return 0;
    return typeof value === "number" ? value : null;
  }

  // The runs' column names: their models, numbered when a model runs more than once.
  function runLabels(entries) {
    const total = {};
    for (const e of entries) total[e.model] = (total[e.model] || 0) + 1;
    const seen = {};
    return entries.map((e) => {
      const name = e.model || e.name;
      if (total[e.model] === 1) return name;
      seen[e.model] = (seen[e.model] || 0) + 1;
      return name + " #" + seen[e.model];
    });
  }

  // The logs of a route, with their entries; null (and the page says why) if one is unknown.
  function loadRuns(route) {
    const entries = route.files.map((f) => store.byFile.get(f));
    const missing = route.files.filter((f, i) => !entries[i]);
    setCrumbs([{ text: "Logs", href: "#/" }, { text: "Compare" }]);
    if (missing.length) {
      showError("No log named '" + missing.join("', '") + "' in this directory.");
      return null;
    }
    if (route.files.length < 2) {
      showError("Comparing needs two or more logs: pick them in the list.");
      return null;
    }
    const labels = runLabels(entries);
    return route.files.map((file, i) => ({ file, entry: entries[i], label: labels[i], data: logData(file) }));
  }

  // One row per sample and epoch seen in any run, each run's row (or null) side by side;
  // `differs`: two runs that have it graded it differently; `change`: per run after the
  // first, +1 better than the first run, -1 worse, 0 the same or not comparable.
  function joinRows(runs) {
    const joined = new Map();
    runs.forEach((run, i) => {
      for (const row of run.data.rows) {
        const id = row.key + "/" + row.epoch;
        let one = joined.get(id);
        if (!one) {
          one = { key: row.key, id: row.id, epoch: row.epoch, input: row.input, target: row.target, runs: runs.map(() => null) };
          joined.set(id, one);
        }
        one.runs[i] = row;
      }
    });
    const rows = Array.from(joined.values());
    for (const one of rows) {
      const present = one.runs.filter(Boolean);
      one.differs = new Set(present.map((r) => scoreKey(r.score))).size > 1;
      one.everywhere = present.length === runs.length;
      const base = one.runs[0] ? rank(one.runs[0].score) : null;
      one.change = one.runs.map((r, i) => {
        const value = r ? rank(r.score) : null;
        return i === 0 || base === null || value === null ? 0 : Math.sign(value - base);
      });
      one.hay = [one.id, one.input, one.target, ...present.map((r) => r.result)].join("\n").toLowerCase();
    }
    return rows.sort((a, b) => Number(b.differs) - Number(a.differs)
      || compareValues(a.id, b.id) || a.epoch - b.epoch);
  }

  const states = new Map(); // compared files -> {q, only, page, rows, rowsKey}

  function compareState(files) {
    const key = files.join("\n");
    let state = states.get(key);
    if (!state) {
      state = { q: "", only: false, page: 0, rows: [], rowsKey: null };
      states.set(key, state);
    }
    return state;
  }

  // The joined rows (recomputed when a run's rows change), then the search and the filter.
  function visible(runs, state) {
    const key = runs.map((r) => r.data.revision).join(",");
    if (state.rowsKey !== key) {
      state.rows = joinRows(runs);
      state.rowsKey = key;
    }
    const q = state.q.trim().toLowerCase();
    return state.rows.filter((r) => (!state.only || r.differs) && (!q || r.hay.includes(q)));
  }

  // The metrics of each run, named as the log page names its cards.
  function metricsOf(entry, scorerNames) {
    const found = new Map();
    for (const score of entry.scores || []) {
      for (const [name, value] of Object.entries(score.metrics || {})) {
        const label = (scorerNames ? score.name + " · " : "") + name;
        found.set(label, { value, stat: (score.stats || {})[name] });
      }
    }
    return found;
  }

  function delta(value, base) {
    if (typeof value !== "number" || typeof base !== "number") return null;
    const d = value - base;
    const text = (d > 0 ? "+" : d < 0 ? "\u2212" : "\u00b1") + fmtNum(Math.abs(d));
    return el("div", { class: "delta " + (d > 0 ? "up" : d < 0 ? "down" : "same"), title: "against the first run", text: "\u0394 " + text });
  }

  // Metrics with their intervals and the runs' totals, a column per run.
  function metricsTable(runs) {
    const scorerNames = runs.some((r) => (r.entry.scores || []).length > 1);
    const perRun = runs.map((r) => metricsOf(r.entry, scorerNames));
    const names = [];
    for (const metrics of perRun) for (const name of metrics.keys()) if (!names.includes(name)) names.push(name);
    const duration = (e) => {
      const start = parseTime(e.started);
      const end = parseTime(e.completed);
      return Number.isNaN(start) || Number.isNaN(end) ? null : (end - start) / 1000;
    };
    const totals = [
      ["Samples", (r) => r.data.rows.length || r.entry.samples, fmtInt],
      ["Errors", (r) => r.data.rows.filter((row) => row.error).length, fmtInt],
      ["Tokens", (r) => r.entry.tokens, fmtInt],
      ["Cost", (r) => r.entry.cost, fmtCost],
      ["Duration", (r) => duration(r.entry), fmtSeconds],
    ];
    return el("table", { id: "compare-metrics" },
      el("thead", {}, el("tr", {}, el("th", { text: "" }), runs.map((r, i) => el("th", { class: "num run-head", "data-run": i },
        el("a", { href: logHref(r.file), text: r.label }), " ", statusBadge(r.entry.status),
        el("div", { class: "muted small", text: fmtDate(r.entry.started || r.entry.created) }))))),
      el("tbody", {},
        names.map((name) => el("tr", { class: "metric-row", "data-metric": name }, el("th", { scope: "row", text: name }),
          perRun.map((metrics, i) => {
            const m = metrics.get(name);
            const base = perRun[0].get(name);
            return el("td", { class: "num metric-cell", "data-run": i }, m ? [
              el("div", { class: "metric-value", text: fmtNum(m.value) }),
              metricNote(m.stat),
              i > 0 && base ? delta(m.value, base.value) : null,
            ] : el("span", { class: "muted", text: "—" }));
          }))),
        totals.map(([name, value, format]) => el("tr", { class: "total-row" }, el("th", { scope: "row", text: name }),
          runs.map((r, i) => el("td", { class: "num", "data-run": i, text: format(value(r)) }))))));
  }

  // "120 samples in every run · 14 graded differently" and, per run after the first,
  // on how many samples it did better and worse than the first.
  function changeSummary(runs, rows) {
    const everywhere = rows.filter((r) => r.everywhere).length;
    const differ = rows.filter((r) => r.differs).length;
    const lines = [el("div", { id: "compare-counts", text: plural(everywhere, "sample") + " in every run · " + fmtInt(differ) + " graded differently" })];
    runs.slice(1).forEach((run, k) => {
      const i = k + 1;
      const better = rows.filter((r) => r.change[i] > 0).length;
      const worse = rows.filter((r) => r.change[i] < 0).length;
      lines.push(el("div", { class: "muted small change-line", "data-run": i },
        run.label + " against " + runs[0].label + ": better on " + plural(better, "sample") + ", worse on " + fmtInt(worse)));
    });
    return lines;
  }

  function runCell(row, i) {
    if (!row) return el("td", { class: "muted run-cell", "data-run": i, title: "not in this run", text: "—" });
    return el("td", { class: "run-cell", "data-run": i },
      scoreBadge(row.score),
      row.error ? [" ", el("span", { class: "flag-error", title: row.error, text: "error" })] : null,
      el("div", { class: "small cell-clip result", title: row.result, text: row.result }));
  }

  function mountCompare(route) {
    const runs = loadRuns(route);
    if (!runs) return { route };
    const files = route.files;
    const state = compareState(files);
    const warning = el("div");
    const metricsBox = el("div", { class: "table-wrap" });
    const summary = el("div", { id: "compare-summary" });
    const count = el("span", { class: "muted small", id: "compare-count" });
    const search = searchBox("compare-search", "Search id, input, target, answers…", state, () => updateTable());
    const only = el("input", { type: "checkbox", id: "compare-only-differ", checked: state.only });
    const table = el("table", { id: "compare-table" });
    const pager = el("div", { class: "pager" });
    only.addEventListener("change", () => { state.only = only.checked; state.page = 0; updateTable(); });
    const task = runs[0].entry.task;
    replace(app,
      el("div", { class: "head" }, el("div", { class: "grow" },
        el("h1", { id: "compare-title", text: task }),
        el("div", { class: "meta" }, el("span", { text: "Comparing " + plural(runs.length, "run") }),
          el("a", { href: "#/", text: "pick other logs" })))),
      warning,
      el("section", { class: "panel", id: "compare-metrics-panel" }, el("h2", { text: "Metrics" }), metricsBox),
      el("section", { class: "panel" }, el("h2", { text: "Samples" }), summary,
        el("div", { class: "controls" }, search,
          el("label", { class: "small" }, only, " only samples graded differently"), count),
        el("div", { class: "table-wrap" }, table), pager));

    function updateHead() {
      for (const run of runs) run.entry = store.byFile.get(run.file) || run.entry;
      const tasks = Array.from(new Set(runs.map((r) => r.entry.task)));
      replace(warning, tasks.length > 1 ? el("div", { class: "error-banner", role: "alert", id: "compare-warning",
        text: "These logs are of different tasks (" + tasks.join(", ") + "): their samples are paired by id and epoch all the same." }) : null);
      replace(metricsBox, metricsTable(runs));
    }

    function updateTable() {
      const rows = visible(runs, state);
      replace(summary, changeSummary(runs, state.rows));
      const pages = Math.max(1, Math.ceil(rows.length / PAGE_SIZE));
      state.page = Math.min(state.page, pages - 1);
      const first = state.page * PAGE_SIZE;
      const slice = rows.slice(first, first + PAGE_SIZE);
      count.textContent = rows.length === state.rows.length ? plural(rows.length, "sample")
        : fmtInt(rows.length) + " of " + plural(state.rows.length, "sample");
      const head = el("thead", {}, el("tr", {},
        ["ID", "Epoch", "Input", "Target"].map((h) => el("th", { class: h === "Epoch" ? "num" : "", text: h })),
        runs.map((r, i) => el("th", { class: "run-head", "data-run": i, text: r.label }))));
      const body = el("tbody", {}, slice.map((r) => el("tr", {
        class: "clickable compare-row" + (r.differs ? " differs" : ""), "data-key": r.key, "data-epoch": r.epoch,
        "data-differs": String(r.differs),
        onclick: (event) => { if (!event.target.closest("a")) location.hash = compareSampleHref(files, r.key, r.epoch); },
      },
      el("td", { class: "nowrap" }, el("a", { href: compareSampleHref(files, r.key, r.epoch), text: String(r.id) })),
      el("td", { class: "num", text: r.epoch }),
      el("td", { class: "cell-clip", title: r.input, text: r.input }),
      el("td", { class: "cell-clip", title: r.target, text: r.target }),
      r.runs.map(runCell))));
      if (!slice.length) {
        body.appendChild(el("tr", {}, el("td", {
          colspan: 4 + runs.length, class: "empty",
          text: runs.some((r) => r.data.loading) && !state.rows.length ? "Loading samples…" : state.rows.length ? "No sample matches." : "No samples yet.",
        })));
      }
      replace(table, head, body);
      const go = (page) => () => { state.page = page; updateTable(); };
      replace(pager,
        el("span", { class: "muted small", text: rows.length ? "Rows " + fmtInt(first + 1) + "\u2013" + fmtInt(first + slice.length) + " of " + fmtInt(rows.length) : "" }),
        el("button", { class: "btn", type: "button", disabled: state.page === 0, onclick: go(state.page - 1), text: "‹ Prev", id: "compare-prev-page" }),
        el("span", { class: "small", text: "Page " + fmtInt(state.page + 1) + " of " + fmtInt(pages) }),
        el("button", { class: "btn", type: "button", disabled: state.page >= pages - 1, onclick: go(state.page + 1), text: "Next ›", id: "compare-next-page" }));
    }

    function update() {
      updateHead();
      updateTable();
    }

    const mounted = { route, update };
    update();
    Promise.allSettled(runs.map((r) => r.data.refresh())).then((done) => {
      if (!isCurrent(mounted)) return;
      update();
      const failed = done.findIndex((d) => d.status === "rejected");
      if (failed >= 0) {
        replace(warning, el("div", { class: "error-banner", role: "alert",
          text: "Cannot load the samples of " + runs[failed].file + ": " + done[failed].reason.message }));
      }
    });
    return mounted;
  }

  // The messages of a sample after its input: its answers (and any tool turns between).
  function answerOf(sample, att) {
    const messages = Array.isArray(sample.messages) ? sample.messages : [];
    const at = messages.findIndex((m) => m && m.role === "assistant");
    if (at >= 0) return conversation(messages.slice(at), att);
    const output = sample.output || {};
    const reply = output.completion || (output.choices && output.choices[0] && output.choices[0].message.content);
    return reply ? conversation([{ role: "assistant", content: reply }], att) : el("p", { class: "muted", text: "No answer." });
  }

  function inputOf(sample, att) {
    if (!Array.isArray(sample.input)) return conversation([{ role: "user", content: sample.input }], att);
    return conversation(sample.input, att);
  }

  function tokensOf(sample) {
    return Object.values(sample.model_usage || {}).reduce(
      (n, u) => n + (u.total_tokens || (u.input_tokens || 0) + (u.output_tokens || 0)), 0);
  }

  function answerColumn(run, sample, route) {
    const head = el("div", { class: "compare-run-head" },
      el("h3", { text: run.label }),
      el("a", { class: "small", href: sampleHref(run.file, route.key, route.epoch), text: "open in its log" }));
    if (!sample) {
      return el("section", { class: "panel compare-run missing", "data-run": run.index }, head,
        el("p", { class: "muted", text: "This run has no such sample" + (run.entry.running ? " (yet)." : ".") }));
    }
    const att = resolver(sample);
    const scores = Object.entries(sample.scores || {});
    const [, first] = scores.length ? scores[0] : [null, null];
    return el("section", { class: "panel compare-run", "data-run": run.index }, head,
      el("div", { class: "compare-grade" }, first ? scoreBadge(first.value) : scoreBadge(null),
        sample.error ? [" ", el("span", { class: "flag-error", text: "error" })] : null),
      sample.error ? el("div", { class: "error-banner", text: sample.error.message || String(sample.error) }) : null,
      el("div", { class: "compare-answer" }, answerOf(sample, att)),
      first && first.explanation ? el("details", { class: "compare-explanation" }, el("summary", { text: "The scorer's explanation" }),
        el("div", { class: "explanation", text: att(first.explanation) })) : null,
      kv([["Tokens", fmtInt(tokensOf(sample))], ["Time", fmtSeconds(sample.total_time)]]));
  }

  function mountCompareSample(route) {
    const runs = loadRuns(route);
    if (!runs) return { route };
    runs.forEach((r, i) => { r.index = i; });
    const { files, key, epoch } = route;
    setCrumbs([{ text: "Logs", href: "#/" }, { text: "Compare", href: compareHref(files) }, { text: "Sample " + key + " · epoch " + epoch }]);
    replace(app, el("p", { class: "muted", text: "Loading the sample…" }));
    const mounted = { route, update: null };
    const state = compareState(files);
    const url = (file) => logBase(file) + "/samples/" + encodeURIComponent(key) + "/" + epoch + ".json";
    // Each run's rows first: a run without the sample is not asked for it.
    const fetchSample = (r) => (r.data.index.has(key + "/" + epoch) ? getJSON(url(r.file)) : Promise.resolve(null));
    Promise.allSettled(runs.map((r) => r.data.refresh())).then(() => Promise.allSettled(runs.map(fetchSample))).then((done) => {
      if (!isCurrent(mounted)) return;
      const samples = done.map((d) => d.status === "fulfilled" ? d.value : null);
      const problem = done.find((d) => d.status === "rejected");
      if (problem) {
        showError("Cannot load the sample: " + problem.reason.message);
        return;
      }
      const shown = samples.find(Boolean);
      if (!shown) {
        showError("No run has sample " + key + " · epoch " + epoch + ".");
        return;
      }
      const rows = visible(runs, state);
      const at = rows.findIndex((r) => r.key === key && r.epoch === epoch);
      const nav = (row, label, id) => el("button", {
        class: "btn", type: "button", id, disabled: !row, text: label,
        onclick: () => { if (row) location.hash = compareSampleHref(files, row.key, row.epoch); },
      });
      const att = resolver(shown);
      const target = Array.isArray(shown.target) ? shown.target.join(" | ") : shown.target;
      replace(app,
        el("div", { class: "head" },
          el("div", { class: "grow" }, el("h1", { id: "sample-title", text: "Sample " + shown.id + " · epoch " + shown.epoch }),
            el("div", { class: "meta" }, el("a", { href: compareHref(files), text: "← back to the comparison" }),
              at >= 0 ? el("span", { text: fmtInt(at + 1) + " of " + fmtInt(rows.length) }) : null)),
          nav(at > 0 ? rows[at - 1] : null, "‹ Previous", "sample-prev"),
          nav(at >= 0 && at < rows.length - 1 ? rows[at + 1] : null, "Next ›", "sample-next")),
        el("div", { class: "cards" },
          card("Target", el("span", { class: "small", text: target === undefined ? "—" : String(att(target)) })),
          card("Runs", fmtInt(runs.length))),
        el("section", { class: "panel", id: "compare-input" }, el("h2", { text: "Input" }), inputOf(shown, att)),
        el("div", { class: "compare-columns", id: "compare-answers" },
          runs.map((run, i) => answerColumn(run, samples[i], route))));
    });
    return mounted;
  }

  return { mountCompare, mountCompareSample };
};
