// The handoff page: renders what /events pushes. Every value goes into the page as text
// (textContent, attributes via setAttribute on SVG): nothing from the model, a task or the
// user is ever parsed as HTML.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const STAGE_NAMES = {
  end_of_speech: "end of speech", commit: "commit", transcript: "transcript", route_sent: "routed",
  call_received: "call", tool_done: "tool done", first_audio: "first audio", last_audio: "last audio",
};
const PART_COLORS = { listener: "#60a5fa", narrator: "#a78bfa", transcription: "#f59e0b", brain: "#10b981" };
let csrf = "";
let state = null;
let sessionBase = null; // [session_age_s, when received] so the age ticks between updates
let lastUpdate = 0; // when the last update came (ms), for "last heard from" while reconnecting

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (key === "text") node.textContent = value;
    else if (key === "cls") node.className = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

const byId = (id) => document.getElementById(id);
const clock = (t) => new Date(t * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
const usd = (v) => (v >= 1 ? "$" + v.toFixed(2) : "$" + v.toFixed(4));
const secs = (v) => (v < 10 ? v.toFixed(2) : v.toFixed(1)) + " s";

function span(seconds) {
  seconds = Math.max(0, Math.floor(seconds));
  if (seconds < 60) return seconds + " s";
  if (seconds < 3600) return Math.floor(seconds / 60) + " min";
  return Math.floor(seconds / 3600) + " h " + (Math.floor(seconds / 60) % 60) + " min";
}

// -- now --------------------------------------------------------------------------------------
function renderNow(now) {
  byId("now").dataset.state = now.state;
  byId("now-state").textContent = now.state;
  sessionBase = now.session_age_s === null ? null : [now.session_age_s, Date.now()];
  const details = byId("now-details");
  const items = [
    now.listener_up ? el("span", { id: "now-session" }) : el("span", { text: "listener down" }),
    el("span", { text: "upload: " + now.upload_mode.replace("_", " ") }),
    el("span", { id: "now-uploading", text: "sending: " + now.uploading }),
  ];
  if (Array.isArray(now.rooms) && now.rooms.length) {
    const names = now.rooms.map((r) => (typeof r === "string" ? r : (r.name || r.room || "") + (r.state ? " " + r.state : "")
      + (typeof r.security === "string" && r.security.startsWith("unauthenticated") ? " (unauthenticated: its audio crosses the network in the clear)" : "")));
    items.push(el("span", { id: "now-rooms", text: "rooms: " + names.join(", ") }));
  }
  if (Array.isArray(now.mcp_servers) && now.mcp_servers.length) {
    const servers = now.mcp_servers.map((s) => el("span", {
      class: "mcp-server", "data-up": s.up ? "yes" : "no",
      title: s.up ? s.transport : s.error || "not reachable",
      text: s.name + " " + (s.up ? "up" : "down") + " (" + s.tools + (s.tools === 1 ? " tool)" : " tools)"),
    }));
    const list = el("span", { id: "now-mcp", text: "MCP servers: " });
    servers.forEach((node, i) => list.append(...(i ? [", ", node] : [node])));
    items.push(list);
  }
  details.replaceChildren(...items);
  tickSession();
}

function tickSession() {
  const node = byId("now-session");
  if (!node || !sessionBase || !state) return;
  const age = sessionBase[0] + (Date.now() - sessionBase[1]) / 1000;
  node.textContent = "session " + state.now.session + ", " + span(age) + " old";
}

// -- commands ---------------------------------------------------------------------------------
const SHOWN_COMMANDS = () => (window.matchMedia("(max-width: 40rem)").matches ? 6 : 12); // a phone: fewer

function stageEnd(stages, order) {
  // Where a command's bar ends: its last stage seen, in seconds from its first.
  const times = order.map((s) => stages[s]).filter((t) => typeof t === "number");
  return times.length ? Math.max(...times) : 0;
}

function stageBar(stages, order, scale) {
  // One segment per stage reached, from the one before it; a stage that did not happen (no tool,
  // no timing yet) has no segment, and the label says so. Every bar is drawn on one time scale
  // (`scale` seconds: the longest command shown fills the track), so a slow command looks slow.
  const present = order.filter((s) => typeof stages[s] === "number");
  const bar = el("div", { cls: "stagebar", role: "img", "data-end": String(stageEnd(stages, order)) });
  let previous = 0;
  for (const stage of present) {
    const at = stages[stage];
    const seg = el("div", { cls: "seg", "data-stage": stage, title: STAGE_NAMES[stage] + " at " + secs(at) });
    seg.style.width = (scale > 0 ? Math.max(0, at - previous) / scale * 100 : 0) + "%";
    seg.style.background = "var(--s-" + stage + ", #9ca3af)";
    bar.append(seg);
    previous = Math.max(previous, at);
  }
  const absent = order.filter((s) => !present.includes(s) && s !== "end_of_speech");
  bar.setAttribute("aria-label", present.map((s) => STAGE_NAMES[s] + " " + secs(stages[s])).join(", ")
    + (absent.length ? "; not seen: " + absent.map((s) => STAGE_NAMES[s]).join(", ") : ""));
  return bar;
}

function renderLegend(order) {
  const legend = byId("stage-legend");
  if (legend.childElementCount) return;
  for (const stage of order) {
    if (stage === "end_of_speech") continue;
    const sw = el("span", { cls: "sw" });
    sw.style.background = "var(--s-" + stage + ", #9ca3af)";
    legend.append(el("span", { cls: "stage" }, sw, STAGE_NAMES[stage]));
  }
}

function timing(stages, order) {
  // Voice to voice when the answer's first audio was timed from the end of speech; else how long
  // the answer took from the first stage that was seen.
  const origin = order.find((s) => typeof stages[s] === "number");
  if (origin === "end_of_speech" && typeof stages.first_audio === "number") {
    return el("span", { cls: "v2v" }, "voice to voice ", el("b", { text: secs(stages.first_audio) }));
  }
  if (origin !== undefined && typeof stages.last_audio === "number") {
    return el("span", { cls: "v2v" }, "said by ", el("b", { text: secs(stages.last_audio) }), " from the " + STAGE_NAMES[origin]);
  }
  return null;
}

function line(label, text, cls) {
  return el("div", { cls: "line " + (cls || "") }, el("span", { cls: "label", text: label }), el("span", { cls: "value", text }));
}

function renderCommands(commands, order) {
  renderLegend(order);
  const list = byId("commands");
  const shown = commands.slice(0, SHOWN_COMMANDS());
  const scale = Math.max(0, ...shown.map((c) => stageEnd(c.stages, order)));
  byId("stage-scale").textContent = scale > 0 ? "bars: 0 to " + secs(scale) : "";
  list.replaceChildren(...shown.map((c) => {
    const item = el("li", { cls: "command" });
    item.append(el("div", { cls: "top" },
      el("span", { cls: "when", text: clock(c.at) }),
      el("span", { cls: "heard", text: c.heard }),
      c.room ? el("span", { cls: "muted", text: c.room }) : null,
      el("span", { cls: "outcome", "data-outcome": c.outcome, text: c.outcome }),
      timing(c.stages, order)));
    c.tools.forEach((tool, i) => {
      item.append(line("ran", tool, "tool"));
      const result = c.results[i];
      if (result !== undefined) item.append(line(result.ok ? "got" : "failed", result.text, result.ok ? "result" : "result failed"));
    });
    if (c.said) item.append(line("said", c.said, "said"));
    item.append(stageBar(c.stages, order, scale));
    return item;
  }));
  byId("commands-empty").hidden = commands.length > 0;
}

// -- tasks ------------------------------------------------------------------------------------
function renderTemplates(templates) {
  const select = byId("task-template");
  const chosen = select.value;
  const names = templates.map((t) => t.name).join("\n");
  if (select.dataset.names !== names) {
    select.dataset.names = names;
    select.replaceChildren(...templates.map((t) => el("option", { value: t.name, text: t.name })));
    if (chosen) select.value = chosen;
    renderParams();
  }
  byId("task-form").hidden = templates.length === 0;
}

function renderParams() {
  const template = (state ? state.templates : []).find((t) => t.name === byId("task-template").value);
  byId("task-params").replaceChildren(...(template ? template.params : []).map((p) =>
    el("input", { name: p.name, placeholder: p.name + (p.default !== null ? " (" + p.default + ")" : ""), "aria-label": p.name })));
}

function renderTasks(tasks) {
  byId("tasks").replaceChildren(...tasks.map((t) => {
    const item = el("li", { cls: "task", "data-id": String(t.id), "data-status": t.status });
    const top = el("div", { cls: "top" },
      el("span", { cls: "muted", text: "#" + t.id }),
      el("span", { cls: "name", text: t.name }),
      el("span", { cls: "status", "data-status": t.status, text: t.status.replace("_", " ") }),
      t.duration_s !== null ? el("span", { cls: "muted", text: span(t.duration_s) }) : null,
      el("span", { cls: "spacer" }));
    if (t.active) {
      const cancel = el("button", { cls: "cancel", type: "button", text: "Cancel" });
      cancel.addEventListener("click", () => post("/api/tasks/cancel", { task: t.id }, "Cancelled #" + t.id + "."));
      top.append(cancel);
    }
    item.append(top);
    const output = t.error ? [t.error, ...t.lines] : t.lines;
    if (output.length) item.append(el("pre", { cls: "output", text: output.join("\n") }));
    return item;
  }));
  byId("tasks-empty").hidden = tasks.length > 0;
}

async function post(path, body, done) {
  const message = byId("task-message");
  message.className = "message";
  try {
    const response = await fetch(path, {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf }, body: JSON.stringify(body),
    });
    const reply = await response.json().catch(() => ({ ok: false, error: "handoff did not answer." }));
    message.textContent = reply.ok ? (done || "Started #" + reply.task.id + " (" + reply.task.name + ").") : reply.error;
    if (!reply.ok) message.className = "message error";
  } catch (error) {
    message.textContent = "handoff cannot be reached.";
    message.className = "message error";
  }
}

// -- cost -------------------------------------------------------------------------------------
function renderCost(cost) {
  if (!cost) {
    byId("cost-total").textContent = "not counted";
    return;
  }
  byId("cost-total").textContent = usd(cost.total);
  const meter = byId("cost-meter");
  meter.hidden = cost.budget === null;
  if (cost.budget !== null) {
    byId("cost-budget").textContent = "budget " + usd(cost.budget) + ", " + usd(cost.left) + " left";
    byId("cost-meter-fill").style.width = Math.min(100, cost.total / cost.budget * 100) + "%";
    meter.classList.toggle("over", cost.left <= 0);
  } else {
    byId("cost-budget").textContent = "no daily budget; about " + usd(cost.per_day_estimate) + " a day at this rate";
  }
  byId("cost-parts").replaceChildren(...Object.entries(cost.today).map(([part, value]) => {
    const sw = el("span", { cls: "sw" });
    sw.style.background = PART_COLORS[part] || "#9ca3af";
    return el("li", { "data-part": part }, sw, part + " " + usd(value));
  }));
  byId("cost-chart").replaceChildren(costChart(cost.days));
}

function costChart(days) {
  const W = 320, H = 120, top = 12, bottom = 18, left = 4;
  const max = Math.max(...days.map((d) => d.total), 0.0001);
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img" });
  const slot = (W - left) / days.length;
  days.forEach((d, i) => {
    let y = H - bottom;
    for (const [part, value] of Object.entries(d.parts)) {
      const h = value / max * (H - top - bottom);
      if (h <= 0) continue;
      y -= h;
      const rect = svg("rect", { x: left + i * slot + 2, y, width: slot - 4, height: h, fill: PART_COLORS[part] || "#9ca3af" });
      rect.append(svg("title", {}, d.day + " " + part + " " + usd(value)));
      chart.append(rect);
    }
    if ((days.length - 1 - i) % 3 === 0) {  // today, and every third day back from it
      const last = i === days.length - 1;  // kept inside the chart
      chart.append(svg("text", { x: last ? W - 1 : left + i * slot + slot / 2, y: H - 4, "text-anchor": last ? "end" : "middle" }, d.day.slice(5)));
    }
  });
  chart.append(svg("text", { x: W - 2, y: 10, "text-anchor": "end" }, "max " + usd(max)));
  return chart;
}

// -- latency ----------------------------------------------------------------------------------
function renderLatency(rows) {
  const W = 320, H = 120, top = 12, bottom = 18, left = 32;
  const values = rows.flatMap((r) => [r.p50, r.p95]).filter((v) => v !== null);
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img" });
  const max = Math.max(...values, 1);
  const x = (i) => left + (i + 0.5) * (W - left) / rows.length;
  const y = (v) => H - bottom - v / max * (H - top - bottom);
  for (const tick of [0, max / 2, max]) {
    chart.append(svg("line", { x1: left, x2: W, y1: y(tick), y2: y(tick), stroke: "#e5e7eb" }));
    chart.append(svg("text", { x: left - 3, y: y(tick) + 3, "text-anchor": "end" }, tick.toFixed(1) + " s"));
  }
  for (const [key, color] of [["p95", "#d97706"], ["p50", "#2563eb"]]) {
    let path = "";
    rows.forEach((r, i) => {
      if (r[key] === null) return;
      path += (path ? " L" : "M") + x(i).toFixed(1) + " " + y(r[key]).toFixed(1);
      const dot = svg("circle", { cx: x(i), cy: y(r[key]), r: 2.2, fill: color, "data-key": key });
      dot.append(svg("title", {}, new Date(r.hour * 1000).getHours() + ":00 " + key + " " + secs(r[key]) + " (" + r.count + ")"));
      chart.append(dot);
    });
    if (path) chart.append(svg("path", { d: path, fill: "none", stroke: color, "stroke-width": 1.5 }));
  }
  rows.forEach((r, i) => {
    if (i % 6 === 2) chart.append(svg("text", { x: x(i), y: H - 4, "text-anchor": "middle" }, new Date(r.hour * 1000).getHours() + ":00"));
  });
  if (!values.length) chart.append(svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle" }, "no answers timed yet"));
  byId("latency-chart").replaceChildren(chart);
}

// -- events -----------------------------------------------------------------------------------
function renderEvents(events) {
  byId("events").replaceChildren(...events.map((e) => el("li", { "data-kind": e.kind },
    el("span", { cls: "when", text: clock(e.at) }),
    el("span", { cls: "kind", "data-kind": e.kind, text: e.kind }),
    el("span", { cls: "text", text: e.text }))));
  byId("events-empty").hidden = events.length > 0;
}

// -- the stream -------------------------------------------------------------------------------
function render(next) {
  state = next;
  csrf = next.csrf;
  renderNow(next.now);
  renderCommands(next.commands, next.stage_order);
  renderTemplates(next.templates);
  renderTasks(next.tasks);
  renderCost(next.cost);
  renderLatency(next.latency);
  renderEvents(next.events);
  document.body.dataset.revision = String(next.revision);
}

function connect() {
  const source = new EventSource("/events");
  source.onopen = () => { byId("conn").hidden = true; };
  source.onmessage = (message) => {
    byId("conn").hidden = true;
    document.body.classList.remove("offline");
    lastUpdate = Date.now();
    render(JSON.parse(message.data));
  };
  source.onerror = () => {
    // EventSource retries by itself (the daemon restarting): say so meanwhile, and show what is
    // on the page as what it was, not as now.
    byId("conn").hidden = false;
    document.body.classList.add("offline");
    byId("now").dataset.state = "reconnecting";
    byId("now-state").textContent = "reconnecting";
    sessionBase = null;
    const seen = lastUpdate ? "last heard from at " + new Date(lastUpdate).toLocaleTimeString() : "not reached yet";
    byId("now-details").replaceChildren(el("span", { text: "handoff " + seen }));
  };
}

document.addEventListener("DOMContentLoaded", () => {
  byId("task-template").addEventListener("change", renderParams);
  byId("task-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const params = {};
    for (const input of byId("task-params").querySelectorAll("input")) if (input.value) params[input.name] = input.value;
    post("/api/tasks/start", { name: byId("task-template").value, params });
  });
  setInterval(tickSession, 1000);
  window.matchMedia("(max-width: 40rem)").addEventListener("change", () => state && renderCommands(state.commands, state.stage_order));
  if (new URLSearchParams(location.search).has("once")) once(); else connect();
});

async function once() {
  // `/?once`: the state as it is now, without the live stream. The stream stays open for as long
  // as the page does (that is what makes it live), so a headless browser's --virtual-time-budget,
  // which waits for the network to go quiet, never ends on the live page; this one does.
  try {
    const response = await fetch("/api/state", { credentials: "same-origin" });
    render(await response.json());
  } catch (error) {
    byId("conn").hidden = false;
  }
}
