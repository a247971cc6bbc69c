// vitals-engine log viewer: a sample's transcript, its events nested in their spans.
//
// Loaded before app.js, which calls `vitalsTranscript(ui)` with its helpers and puts the
// panel this returns on a sample's page. The rules of app.js hold here too: the DOM is
// built with createElement and textContent only, every value from the log is text.
//
// Events nest by ids, as Inspect's viewer nests them: a span (`span_begin`) goes in its
// `parent_id`, any other event in its `span_id`; a span or event naming a span not yet
// begun goes at the top. A tool call's event that Inspect wrote beside the tool span it
// opened (just after its begin, same function) goes in that span. A sample of thousands
// of events stays quick: each level shows PAGE items and a button for the next ones, and
// a span's insides are drawn when it is first opened; spans open by themselves only
// while fewer than OPEN_BUDGET items are drawn.
"use strict";

window.vitalsTranscript = function (ui) {
  const { el, json, plural, fmtInt, fmtSeconds, scoreBadge, contentBlocks } = ui;

  const PAGE = 200;
  const OPEN_BUDGET = 2000;
  // The events that make a transcript worth its panel (model and score events alone
  // are the conversation and the scoring, shown already).
  const TRANSCRIPT_EVENTS = new Set(["span_begin", "tool", "sandbox", "sample_limit", "error"]);

  function isObject(value) {
    return value !== null && typeof value === "object" && !Array.isArray(value);
  }

  function hasTranscript(events) {
    return events.some((e) => isObject(e) && TRANSCRIPT_EVENTS.has(e.event));
  }

  // The events as a tree: {children} at the top, spans {begin, end, children}.
  function tree(events) {
    const root = { children: [] };
    const spans = new Map();
    const placed = new Set();
    for (const e of events) {
      if (isObject(e) && e.event === "span_begin" && typeof e.id === "string" && !spans.has(e.id)) {
        spans.set(e.id, { begin: e, end: null, children: [] });
      }
    }
    const inSpan = (id) => (typeof id === "string" && placed.has(id) ? spans.get(id) : root);
    let previous = null;
    for (const e of events) {
      if (!isObject(e)) continue;
      if (e.event === "span_begin") {
        const node = spans.get(e.id);
        if (node && node.begin === e) {
          inSpan(e.parent_id).children.push(node);
          placed.add(e.id);
        }
      } else if (e.event === "span_end") {
        const node = spans.get(e.id);
        if (node) node.end = e;
      } else {
        let parent = inSpan(e.span_id);
        const opened = previous && previous.event === "span_begin" && previous.type === "tool"
          && previous.name === e.function ? spans.get(previous.id) : null;
        if (e.event === "tool" && opened && opened !== parent && !opened.children.some((c) => c.event && c.event.event === "tool")) {
          parent = opened;
        }
        parent.children.push({ event: e });
      }
      previous = e;
    }
    return root;
  }

  function countEvents(node) {
    let n = 0;
    const stack = [node];
    while (stack.length) {
      const item = stack.pop();
      for (const child of item.children) {
        n += 1;
        if (child.children) stack.push(child);
      }
    }
    return n;
  }

  function offset(e) {
    return typeof e.working_start === "number" ? "+" + fmtSeconds(Math.max(0, e.working_start)) : null;
  }

  function head(kind, e, ...rest) {
    return el("div", { class: "event-head" },
      el("span", { class: "event-kind", text: kind }), rest,
      offset(e) ? el("span", { class: "event-time muted small", text: offset(e) }) : null);
  }

  function text(att, value) {
    const resolved = att(value);
    return resolved === null || resolved === undefined ? "" : String(resolved);
  }

  function model(e) {
    const usage = (e.output && e.output.usage) || {};
    const choice = e.output && Array.isArray(e.output.choices) ? e.output.choices[0] : null;
    const completion = (e.output && e.output.completion) || "";
    return el("div", { class: "event event-model" },
      head("model", e, el("code", { text: e.model || "model" }),
        e.role ? el("span", { class: "muted small", text: e.role }) : null,
        el("span", { class: "muted small", text: fmtInt(usage.input_tokens) + " in · " + fmtInt(usage.output_tokens) + " out" }),
        typeof e.working_time === "number" ? el("span", { class: "muted small", text: fmtSeconds(e.working_time) }) : null,
        e.error ? el("span", { class: "flag-error", title: String(e.error), text: "error" }) : null),
      completion ? el("div", { class: "event-preview", text: String(completion).slice(0, 300) }) : null,
      choice && choice.message && Array.isArray(choice.message.tool_calls) && choice.message.tool_calls.length
        ? el("div", { class: "muted small", text: "asks for " + choice.message.tool_calls.map((c) => String(c.function)).join(", ") })
        : null);
  }

  function tool(e, att) {
    const args = isObject(e.arguments) ? Object.fromEntries(Object.entries(e.arguments).map(([k, v]) => [k, att(v)])) : e.arguments;
    const error = isObject(e.error) ? e.error : null;
    return el("div", { class: "event event-tool" + (error ? " failed" : "") },
      head("tool", e, el("code", { class: "fn", text: String(e.function || "tool") }),
        e.id ? el("span", { class: "muted small", text: String(e.id) }) : null,
        typeof e.working_time === "number" ? el("span", { class: "muted small", text: fmtSeconds(e.working_time) }) : null),
      el("div", { class: "tool-arguments" }, json(args === undefined ? {} : args)),
      el("div", { class: "tool-result" }, el("div", { class: "muted small", text: "result" }),
        contentBlocks(e.result === undefined ? "" : e.result, att)),
      error ? el("div", { class: "tool-error", text: "Error (" + String(error.type || "unknown") + "): " + text(att, error.message) }) : null);
  }

  function sandbox(e, att) {
    const what = e.action === "exec" ? e.cmd : e.file;
    return el("div", { class: "event event-sandbox" },
      head("sandbox", e, el("span", { class: "badge", text: String(e.action || "action") }),
        typeof e.result === "number" ? el("span", { class: e.result ? "flag-error" : "muted small", text: "exit " + e.result }) : null),
      what !== undefined && what !== null ? el("pre", { class: "sandbox-what", text: text(att, what) }) : null,
      e.input !== undefined && e.input !== null ? el("details", {}, el("summary", { text: "input" }), el("pre", { class: "sandbox-io", text: text(att, e.input) })) : null,
      e.output !== undefined && e.output !== null ? el("pre", { class: "sandbox-io", text: text(att, e.output) }) : null);
  }

  function limit(e, att) {
    const value = typeof e.limit === "number" ? " (" + e.limit + ")" : "";
    return el("div", { class: "event event-limit" },
      head("limit", e), el("div", { class: "error-banner", text: "Limit hit: " + String(e.type || "limit") + value + ". " + text(att, e.message) }));
  }

  function error(e, att) {
    const err = isObject(e.error) ? e.error : {};
    return el("div", { class: "event event-error" },
      head("error", e), el("div", { class: "error-banner", text: text(att, err.message) }),
      err.traceback ? el("details", {}, el("summary", { text: "Traceback" }), el("pre", { class: "traceback", text: text(att, err.traceback) })) : null);
  }

  function score(e, att) {
    const value = isObject(e.score) ? e.score.value : undefined;
    const answer = isObject(e.score) ? e.score.answer : null;
    return el("div", { class: "event event-score" },
      head("score", e, scoreBadge(value)),
      answer !== null && answer !== undefined ? el("div", { class: "event-preview", text: text(att, answer).slice(0, 300) }) : null);
  }

  // Any other event (sample_init, state, logger ...): its kind, its JSON when opened.
  function other(e) {
    const body = el("div");
    const details = el("details", { class: "event event-other" },
      el("summary", {}, el("span", { class: "event-kind", text: String(e.event) }),
        offset(e) ? el("span", { class: "event-time muted small", text: " " + offset(e) }) : null), body);
    details.addEventListener("toggle", () => {
      if (details.open && !body.firstChild) body.appendChild(json(e));
    });
    return details;
  }

  const DRAW = { model, tool, sandbox, sample_limit: limit, error, score };

  function spanTime(node) {
    const a = node.begin.working_start;
    const b = node.end ? node.end.working_start : null;
    return typeof a === "number" && typeof b === "number" ? fmtSeconds(Math.max(0, b - a)) : null;
  }

  function span(node, ctx) {
    const begin = node.begin;
    const type = typeof begin.type === "string" ? begin.type : "";
    const body = el("div", { class: "span-body" });
    const events = countEvents(node);
    const details = el("details", { class: "span" + (type ? " span-" + type.replace(/[^a-z_-]/gi, "") : ""), "data-type": type, "data-span": String(begin.id) },
      el("summary", {},
        el("span", { class: "span-name", text: String(begin.name === undefined ? begin.id : begin.name) }),
        type ? el("span", { class: "badge", text: type }) : null,
        el("span", { class: "muted small", text: plural(events, "event") }),
        spanTime(node) ? el("span", { class: "muted small", text: spanTime(node) }) : null,
        node.end ? null : el("span", { class: "muted small", text: "not ended" })),
      body);
    let drawn = false;
    const draw = () => {
      if (drawn) return;
      drawn = true;
      items(body, node.children, ctx);
    };
    if (type !== "init" && ctx.drawn < OPEN_BUDGET) {
      details.open = true;
      draw();
    }
    details.addEventListener("toggle", () => { if (details.open) draw(); });
    return details;
  }

  function item(child, ctx) {
    ctx.drawn += 1;
    if (child.begin) return span(child, ctx);
    const e = child.event;
    const drawEvent = DRAW[e.event];
    return drawEvent ? drawEvent(e, ctx.att) : other(e);
  }

  // Up to PAGE of `children` into `container`, then a button for the next PAGE.
  function items(container, children, ctx) {
    let shown = 0;
    const more = () => {
      const stop = Math.min(children.length, shown + PAGE);
      for (; shown < stop; shown++) container.appendChild(item(children[shown], ctx));
      if (shown < children.length) {
        const left = children.length - shown;
        const button = el("button", {
          class: "btn show-more", type: "button", text: "Show " + fmtInt(Math.min(left, PAGE)) + " more of " + fmtInt(left),
          onclick: () => { button.remove(); more(); },
        });
        container.appendChild(button);
      }
    };
    more();
  }

  // The panel of a sample's transcript, or null when its events are only model calls and
  // scores (the conversation and the scoring show them).
  function transcriptPanel(events, att) {
    if (!hasTranscript(events)) return null;
    const root = tree(events);
    const body = el("div", { class: "transcript" });
    items(body, root.children, { att, drawn: 0 });
    return el("section", { class: "panel", id: "transcript" },
      el("h2", { text: "Transcript" }),
      el("p", { class: "muted small", text: plural(events.length, "event") + ": spans, model calls, tool calls, sandbox actions, as they happened." }),
      body);
  }

  return { transcriptPanel };
};
