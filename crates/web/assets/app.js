// partita web: the page. Plain JS, no build step; everything comes from this server's /api.
"use strict";

const $ = (sel) => document.querySelector(sel);
const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];
const colours = new Map();
function colour(name) {
  if (!colours.has(name)) colours.set(name, PALETTE[colours.size % PALETTE.length]);
  return colours.get(name);
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
  return e;
}
const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

const fmtUs = (us) => us === null || us === undefined ? "–" : us >= 1000 ? (us / 1000).toFixed(2) + " ms" : us.toFixed(0) + " µs";
const fmtBytes = (b) => b === null || b === undefined ? "–" : b >= 1 << 20 ? (b / (1 << 20)).toFixed(1) + " MiB" : (b / 1024).toFixed(0) + " KiB";
const fmtPct = (x) => x === null || x === undefined || !isFinite(x) ? "–" : (100 * x).toFixed(1) + " %";

let current = null;       // the system shown
let source = null;        // its EventSource
let lastState = null;     // the state before the newest (for CPU shares)
let cpuShare = new Map(); // partition → share of one CPU over the last state period
const plots = new Map();  // "module/cpu" → uPlot
let eventsSeen = 0;

function message(text, error) {
  const m = $("#message");
  m.textContent = text;
  m.className = error ? "message error" : "message";
  m.hidden = !text;
}

async function loadSystems() {
  let list = [];
  try {
    const r = await fetch("/api/systems");
    list = await r.json();
  } catch (e) {
    $("#conn").textContent = "server unreachable";
    $("#conn").className = "conn down";
    return;
  }
  const nav = $("#systems");
  nav.replaceChildren(...list.map((s) => el("a", {
    href: "#" + encodeURIComponent(s.name),
    class: (s.name === current ? "current " : "") + (s.alive ? "" : "dead"),
    title: s.alive ? "supervisor pid " + s.supervisor_pid : "the supervisor (pid " + s.supervisor_pid + ") is gone",
  }, s.name)));
  $("#none").hidden = list.length > 0;
  const wanted = decodeURIComponent(location.hash.slice(1));
  const pick = list.find((s) => s.name === wanted) || list[0];
  if (pick && pick.name !== current) show(pick.name);
}

function show(name) {
  if (source) source.close();
  current = name;
  lastState = null;
  cpuShare = new Map();
  eventsSeen = 0;
  for (const p of plots.values()) p.destroy();
  plots.clear();
  $("#cpus").replaceChildren();
  $("#events tbody").replaceChildren();
  $("#system").hidden = false;
  $("#sys-name").textContent = name;
  for (const a of document.querySelectorAll("#systems a")) a.classList.toggle("current", a.textContent === name);
  const base = "/api/systems/" + encodeURIComponent(name);
  fetch(base + "/events").then((r) => r.json()).then((page) => {
    if (current !== name) return;
    for (const e of page.events) addEvent(e, false);
    // The stream goes on from the next line of the event file.
    openStream(base + "/stream?since=" + page.next, name);
  }).catch(() => openStream(base + "/stream", name));
}

function openStream(url, name) {
  source = new EventSource(url);
  source.addEventListener("open", () => { $("#conn").textContent = "live"; $("#conn").className = "conn"; });
  source.addEventListener("error", () => { $("#conn").textContent = "reconnecting…"; $("#conn").className = "conn down"; });
  source.addEventListener("state", (m) => { if (current === name) render(JSON.parse(m.data)); });
  source.addEventListener("event", (m) => { if (current === name) addEvent(JSON.parse(m.data), true); });
  source.addEventListener("gone", () => { message("The system is gone (its state file was removed)."); source.close(); loadSystems(); });
}

function addEvent(e, fresh) {
  eventsSeen++;
  const t = e.unix_ms ? new Date(e.unix_ms).toLocaleTimeString([], { hour12: false }) + "." + String(e.unix_ms % 1000).padStart(3, "0") : "";
  let exit = "";
  if (e.exit) exit = typeof e.exit === "object" ? Object.entries(e.exit).map(([k, v]) => k + " " + v).join(", ") : String(e.exit);
  const row = el("tr", { class: fresh ? "new" : "", "data-partition": e.partition || "", "data-event": e.event || "" },
    el("td", {}, t), el("td", {}, e.partition || ""), el("td", {}, e.event || ""), el("td", { class: "num" }, e.pid ?? ""),
    el("td", {}, exit), el("td", {}, e.detail || ""));
  const body = $("#events tbody");
  body.prepend(row);
  while (body.rows.length > 300) body.deleteRow(body.rows.length - 1);
  if (fresh) setTimeout(() => row.classList.remove("new"), 3000);
}

function render(s) {
  $("#sys-info").textContent = `supervisor pid ${s.supervisor_pid} · freezing: ${s.freeze_backend} · up ${Math.round((s.updated_unix_ms - s.started_unix_ms) / 1000)} s · state of ${new Date(s.updated_unix_ms).toLocaleTimeString([], { hour12: false })}`;
  // CPU shares: CPU time used over the last state period against the wall time.
  if (lastState && s.updated_unix_ms > lastState.updated_unix_ms) {
    const wall_us = (s.updated_unix_ms - lastState.updated_unix_ms) * 1000;
    const before = new Map(lastState.partitions.map((p) => [p.partition, p.cpu_us]));
    for (const p of s.partitions) {
      const b = before.get(p.partition);
      if (p.cpu_us !== null && b !== null && b !== undefined && p.cpu_us >= b) cpuShare.set(p.partition, (p.cpu_us - b) / wall_us);
    }
  }
  lastState = s;
  renderPlans(s);
  renderCpus(s);
  renderPartitions(s);
  renderRouters(s);
  renderMonitors(s.system);
}

// Monitoring nodes (the paper's monitor): their last second's response times, from their logs, and the last
// frame each saved.
let monitorsBusy = false;
async function renderMonitors(system) {
  if (monitorsBusy) return;
  monitorsBusy = true;
  try {
    const r = await fetch(`/api/systems/${encodeURIComponent(system)}/monitors`);
    const list = r.ok ? await r.json() : [];
    const section = $("#monitors-section");
    section.hidden = !Array.isArray(list) || list.length === 0;
    if (section.hidden || current !== system) return;
    $("#monitors").replaceChildren(...list.map((m) => {
      const l = m.last_second || {};
      const figures = el("table", { class: "monitor" },
        el("thead", {}, el("tr", {}, ...["node", "running for", "answered", "timed out", "p50", "p99", "max"].map((c) => el("th", {}, c)))),
        el("tbody", {}, el("tr", { "data-node": m.node },
          el("td", {}, m.node), el("td", { class: "num" }, `${(l.seconds || 0).toFixed(0)} s`),
          el("td", { class: "num" }, String(l.answered ?? "")), el("td", { class: "num" }, String(l.timed_out ?? "")),
          el("td", { class: "num p50" }, fmtUs(l.p50_us)), el("td", { class: "num p99" }, fmtUs(l.p99_us)), el("td", { class: "num" }, fmtUs(l.max_us)))));
      const frame = m.frame ? el("img", { class: "frame", alt: `the last frame ${m.node} received`, src: `/api/systems/${encodeURIComponent(system)}/frames/${encodeURIComponent(m.node)}?t=${Date.now()}` }) : null;
      return el("div", { class: "monitor-node" }, figures, frame);
    }));
  } catch (e) {
    // The next state tries again.
  } finally {
    monitorsBusy = false;
  }
}

function renderPlans(s) {
  const box = $("#plans");
  box.replaceChildren(...(s.plans || []).map((p) => {
    const select = el("select", { "aria-label": "plan of " + p.module }, ...p.plans.map((n) => {
      const o = el("option", { value: n }, n);
      if (n === p.plan) o.selected = true;
      return o;
    }));
    const now = el("input", { type: "checkbox", title: "switch at once instead of at the end of the major frame" });
    const go = el("button", { type: "button", onclick: () => admin("plan", { module: p.module, plan: select.value, now: now.checked }) }, "switch");
    return el("div", { class: "plan" },
      el("b", {}, p.module), ": running ", el("b", { class: "plan-name" }, p.plan),
      p.next ? ` (switching to ${p.next})` : "", ` · ${p.switches} switches · `,
      select, " ", el("label", {}, now, " now"), " ", go);
  }));
  if (!(s.plans || []).length) box.replaceChildren(el("p", { class: "hint" }, "No planned module."));
}

function renderCpus(s) {
  const box = $("#cpus");
  const keys = new Set();
  for (const c of s.cpus || []) {
    const key = c.module + "/" + c.cpu;
    keys.add(key);
    let card = box.querySelector(`[data-key="${CSS.escape(key)}"]`);
    if (!card) {
      card = el("div", { class: "cpu", "data-key": key },
        el("h4", {}), el("div", { class: "row" }, el("div", { class: "tl" }), el("div", { class: "hist" })), el("div", { class: "stats" }));
      box.append(card);
    }
    card.querySelector("h4").textContent = `${c.module} · CPU ${c.cpu} · plan ${c.plan} · major frame ${fmtUs(c.major_frame_ns / 1000)}`;
    const l = c.lateness, ll = c.lateness_last;
    card.querySelector(".stats").replaceChildren(
      el("span", { class: "frames" }, `frame ${c.frames}`), ` · ${c.windows_started} window records · lateness of window starts since up: p50 ${fmtUs(l.p50_us)}, p99 ${fmtUs(l.p99_us)}, p99.9 ${fmtUs(l.p999_us)}, max ${fmtUs(l.max_us)} (${l.count}); last second: p99 ${fmtUs(ll.p99_us)}, max ${fmtUs(ll.max_us)} (${ll.count})`);
    card.querySelector(".tl").replaceChildren(timeline(c));
    histogram(key, card.querySelector(".hist"), c);
  }
  for (const card of [...box.children]) if (!keys.has(card.dataset.key)) card.remove();
}

// The last frames of one CPU: planned windows as outlines, the executed ones (from one recorded switch to the
// next) filled and labelled with their start's lateness.
function timeline(c) {
  const W = 720, rowH = 22, left = 60, F = c.major_frame_ns || 1;
  const recent = (c.recent || []).filter((r) => r.plan === c.plan);
  const frames = [...new Set(recent.map((r) => r.frame))].sort((a, b) => a - b).slice(-4);
  const H = 16 + rowH * Math.max(frames.length, 1) + 4;
  const root = svg("svg", { class: "timeline", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `timeline of CPU ${c.cpu}` });
  const x = (ns) => left + (W - left - 4) * Math.min(Math.max(ns / F, 0), 1);
  for (const w of c.windows) root.append(svg("text", { x: x(w.start_ns) + 2, y: 11 }, w.partition));
  frames.forEach((f, k) => {
    const y = 16 + k * rowH;
    root.append(svg("text", { x: 2, y: y + 14 }, "frame " + f));
    for (const w of c.windows) root.append(svg("rect", { class: "planned", x: x(w.start_ns), y: y + 1, width: Math.max(x(w.start_ns + w.duration_ns) - x(w.start_ns), 1), height: rowH - 4 }));
  });
  const base = (f) => c.origin_ns + f * F;
  for (let i = 0; i < recent.length; i++) {
    const r = recent[i], k = frames.indexOf(r.frame);
    if (k < 0 || !r.partition) continue;
    const next = recent[i + 1];
    const end = next ? next.switched_ns : c.now_ns;
    const s0 = r.switched_ns - base(r.frame), s1 = Math.min(end - base(r.frame), F);
    if (s0 < 0 || s0 > F) continue;
    const y = 16 + k * rowH;
    const late_us = (r.switched_ns - r.planned_ns) / 1000;
    const rect = svg("rect", { x: x(s0), y: y + 4, width: Math.max(x(s1) - x(s0), 1), height: rowH - 10, fill: colour(r.partition), "data-partition": r.partition });
    rect.append(svg("title", {}, `${r.partition}: frame ${r.frame}, woke ${((r.woke_ns - r.planned_ns) / 1000).toFixed(1)} µs late, switched ${late_us.toFixed(1)} µs late`));
    root.append(rect);
    root.append(svg("text", { x: x(s0) + 2, y: y + rowH - 1, class: late_us > 100 ? "late" : "" }, "+" + late_us.toFixed(0)));
  }
  return root;
}

// The lateness histogram (since up) of one CPU: bucket upper edge (µs, log scale) against count.
function histogram(key, box, c) {
  const b = c.lateness.buckets || [];
  const xs = b.map((p) => p[0]), ys = b.map((p) => p[1]);
  const data = xs.length ? [xs, ys] : [[1], [0]];
  let plot = plots.get(key);
  if (!plot) {
    if (typeof uPlot === "undefined") return;
    plot = new uPlot({
      width: 360, height: 160, title: "window-start lateness",
      scales: { x: { time: false, distr: 3 }, y: { range: (u, lo, hi) => [0, Math.max(hi, 1) * 1.1] } },
      axes: [{ label: "µs (bucket upper edge)", size: 36 }, { label: "starts", size: 50 }],
      legend: { show: false },
      series: [{}, { label: "starts", stroke: "#4e79a7", fill: "rgba(78,121,167,0.3)", paths: uPlot.paths.bars({ size: [0.8, 24] }), points: { show: false } }],
    }, data, box);
    plots.set(key, plot);
  } else {
    plot.setData(data);
  }
}

function plannedShares(s) {
  const shares = new Map();
  for (const c of s.cpus || []) {
    for (const w of c.windows) shares.set(w.partition, (shares.get(w.partition) || 0) + w.duration_ns / c.major_frame_ns);
  }
  return shares;
}

function renderPartitions(s) {
  const planned = plannedShares(s);
  const body = $("#partitions tbody");
  body.replaceChildren(...s.partitions.map((p) => {
    const stopped = p.pid === null || p.pid === undefined;
    const w = p.windows;
    const name = p.partition;
    return el("tr", { class: stopped ? "stopped" : "", "data-partition": name },
      el("td", {}, name), el("td", {}, p.module ?? "(node)"),
      el("td", { class: "state" }, stopped ? "stopped" : (p.mode || "running")),
      el("td", { class: "num pid" }, stopped ? "–" : p.pid),
      el("td", { class: "num" }, p.cpu_us === null ? "–" : (p.cpu_us / 1e6).toFixed(2) + " s"),
      el("td", { class: "num" }, fmtPct(cpuShare.get(name))),
      el("td", { class: "num" }, planned.has(name) ? fmtPct(planned.get(name)) : "–"),
      el("td", { class: "num" }, fmtBytes(p.memory_bytes)),
      el("td", { class: "num restarts" }, p.restarts),
      el("td", { class: "num" }, w ? `${w.in_window} / ${w.missed} / ${w.ran_outside} (${fmtUs(w.outside_us)})` : "–"),
      el("td", {},
        el("button", { type: "button", onclick: () => admin(`partitions/${encodeURIComponent(name)}/restart`) }, "restart"),
        el("button", { type: "button", onclick: () => admin(`partitions/${encodeURIComponent(name)}/restart?cold=1`) }, "cold"),
        el("button", { type: "button", onclick: () => admin(`partitions/${encodeURIComponent(name)}/stop`) }, "stop")));
  }));
}

// Routing partitions' statistics (the status node's `routers.routes`: one row per router, route and topic), with
// the rates since the previous state.
const lastRoutes = new Map();
function renderRouters(s) {
  const section = $("#routers-section");
  const rows = s.routers && Array.isArray(s.routers.routes) ? s.routers.routes : null;
  if (!rows) { section.hidden = true; return; }
  section.hidden = false;
  const now = s.routers.updated_unix_ms || s.updated_unix_ms || 0;
  const num = (v) => (typeof v === "number" ? v : 0);
  const rate = (key, field, v) => {
    const before = lastRoutes.get(key + "|" + field);
    lastRoutes.set(key + "|" + field, { v, t: now });
    if (!before || now <= before.t) return "";
    return ((v - before.v) * 1000 / (now - before.t)).toFixed(0);
  };
  const cols = ["router", "route", "topic", "received", "in /s", "forwarded", "out /s", "dropped (rate)", "dropped (downsample)", "dropped (queue)", "dropped (back-pressure)", "errors", "p50 µs", "p99 µs"];
  const head = el("thead", {}, el("tr", {}, ...cols.map((c) => el("th", {}, c))));
  const body = el("tbody", {}, ...rows.map((r) => {
    const key = `${r.router}|${r.route}|${r.topic}`;
    const cells = [
      [r.router, ""], [r.route, ""], [r.topic, ""],
      [num(r.received), "num"], [rate(key, "in", num(r.received)), "num"],
      [num(r.forwarded), "num"], [rate(key, "out", num(r.forwarded)), "num"],
      [num(r.dropped_rate), "num"], [num(r.dropped_downsample), "num"], [num(r.dropped_queue), "num"],
      [num(r.dropped_backpressure), "num"], [num(r.errors), "num"],
      [num(r.latency_p50_us).toFixed(0), "num"], [num(r.latency_p99_us).toFixed(0), "num"],
    ];
    return el("tr", { class: r.active === false ? "ended" : "" }, ...cells.map(([v, c]) => el("td", { class: c }, String(v ?? ""))));
  }));
  $("#routers").replaceChildren(el("table", { class: "routes" }, head, body));
}

function token(ask) {
  let t = sessionStorage.getItem("partita-token");
  if (!t || ask) {
    t = prompt("The admin token (from partita web's token file, e.g. /etc/partita/web.token):") || "";
    if (t) sessionStorage.setItem("partita-token", t.trim());
  }
  return t ? t.trim() : "";
}

async function admin(action, body) {
  if (!current) return;
  const t = token(false);
  if (!t) { message("No token given: admin actions need partita web's token.", true); return; }
  const init = { method: "POST", headers: { Authorization: "Bearer " + t } };
  if (body) { init.body = JSON.stringify(body); init.headers["Content-Type"] = "application/json"; }
  try {
    const r = await fetch(`/api/systems/${encodeURIComponent(current)}/${action}`, init);
    const a = await r.json();
    if (r.status === 401 || r.status === 403) sessionStorage.removeItem("partita-token");
    message(r.ok ? a.detail : `${r.status}: ${a.error}`, !r.ok);
  } catch (e) {
    message("The request failed: " + e, true);
  }
}

$("#token-button").addEventListener("click", () => { token(true); });
window.addEventListener("hashchange", loadSystems);
loadSystems();
setInterval(loadSystems, 5000);
