// dg_view.js: the behaviour of `dagatron view`'s page. It reads the data
// (cli/dg_view_page.h) from the #dg-data element and draws:
//  - the timeline: one row per (rank, stream), a box per task, the exposed
//    communication as a red band under the comm row, the critical path
//    (marked by dagatron: crit = 1) outlined; wheel zooms, drag pans;
//  - the per-rank table: busy time per stream, exposed comm and h, worked
//    out here from the events the way train/dg_trace_stats.c does (the test
//    compares the two);
//  - the graph: nodes grouped by layer, each layer collapsed; a click on a
//    node selects its tasks on the timeline, a click on a task its node.
// What tests read back is in data-* attributes (data-rank, data-stream,
// data-n-events, data-exposed-us, ...); body[data-ready] says it is drawn.
// The URL's fragment preselects: #node=N or #event=I.
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("dg-data").textContent);
  const F = {};
  data.fields.forEach((f, i) => { F[f] = i; });
  const events = data.events.map((a, i) => ({
    i, pid: a[F.pid], tid: a[F.tid], ts: a[F.ts], dur: a[F.dur], end: a[F.ts] + a[F.dur], node: a[F.node],
    layer: a[F.layer], mb: a[F.mb], step: a[F.step], name: a[F.name], op: a[F.op], phase: a[F.phase],
    crit: a[F.crit] === 1, after: a[F.after] || [],
  }));
  const COMM = 1;
  const LABEL_W = 200;

  // ---- interval arithmetic (mirrors train/dg_trace_stats.c) ----
  function union(iv) {
    const s = iv.slice().sort((x, y) => x[0] - y[0]);
    const out = [];
    for (const [a, b] of s) {
      if (out.length && a <= out[out.length - 1][1]) out[out.length - 1][1] = Math.max(out[out.length - 1][1], b);
      else out.push([a, b]);
    }
    return out;
  }
  const total = (iv) => iv.reduce((s, [a, b]) => s + (b - a), 0);
  // m minus c, both disjoint and sorted: the parts of m that c does not cover.
  function minus(m, c) {
    const out = [];
    let j = 0;
    for (const [ma, mb] of m) {
      let a = ma;
      while (j < c.length && c[j][1] <= a) j++;
      for (let k = j; k < c.length && c[k][0] < mb; k++) {
        if (c[k][0] > a) out.push([a, c[k][0]]);
        a = Math.max(a, c[k][1]);
      }
      if (a < mb) out.push([a, mb]);
    }
    return out;
  }

  // (not Math.max(...a): a spread of 100k arguments overflows the stack)
  const maxOf = (a, f) => a.reduce((m, x) => Math.max(m, f(x)), -Infinity);
  const minOf = (a, f) => a.reduce((m, x) => Math.min(m, f(x)), Infinity);

  // ---- ranks, streams, figures ----
  const procName = new Map(data.procs.map((p) => [p.pid, p.name]));
  const pids = [...new Set(data.procs.map((p) => p.pid).concat(events.map((e) => e.pid)))].sort((a, b) => a - b);
  const streamName = new Map(data.streams.map((s) => [s.pid + "/" + s.tid, s.name]));
  const rows = [];
  const stats = new Map();
  for (const pid of pids) {
    const mine = events.filter((e) => e.pid === pid);
    const tids = [...new Set(data.streams.filter((s) => s.pid === pid).map((s) => s.tid)
      .concat(mine.map((e) => e.tid)))].sort((a, b) => a - b);
    for (const tid of tids) {
      rows.push({ pid, tid, name: streamName.get(pid + "/" + tid) || "stream " + tid,
        events: mine.filter((e) => e.tid === tid) });
    }
    const iv = (tid) => union(mine.filter((e) => e.tid === tid).map((e) => [e.ts, e.end]));
    const comp = iv(0), comm = iv(COMM);
    const exposed = minus(comm, comp);
    const tc = total(comp), tm = total(comm);
    const span = mine.length ? maxOf(mine, (e) => e.end) - minOf(mine, (e) => e.ts) : 0;
    // h: the comm time that ran under compute, over all comm (train/dg_trace_stats.h)
    const h = tm > 0 ? Math.min(Math.max(1 - total(exposed) / tm, 0), 1) : 0;
    stats.set(pid, { tc, tm, exposed, exposedUs: total(exposed), span,
      nc: mine.filter((e) => e.tid === 0).length, nm: mine.filter((e) => e.tid === COMM).length,
      h });
  }
  const t0 = events.length ? minOf(events, (e) => e.ts) : 0;
  const t1 = events.length ? maxOf(events, (e) => e.end) : 1;
  let v0 = t0, v1 = t1 > t0 ? t1 : t0 + 1; // the window shown, microseconds

  // ---- the timeline ----
  const rowsEl = document.getElementById("rows");
  const boxes = new Array(events.length);
  const bands = [];
  const kind = (e) => (e.tid === COMM ? "comm" : ["forward", "backward", "recompute"].includes(e.phase) ? e.phase
    : "other");
  for (const r of rows) {
    const row = document.createElement("div");
    row.className = "row" + (r.tid === COMM ? " comm" : "");
    row.dataset.rank = r.pid;
    row.dataset.tid = r.tid;
    row.dataset.stream = r.name;
    row.dataset.nEvents = r.events.length;
    const label = document.createElement("div");
    label.className = "label";
    label.textContent = "rank " + r.pid + " \u00b7 " + r.name;
    label.title = (procName.get(r.pid) || "rank " + r.pid) + ": " + r.name + " stream, " + r.events.length + " tasks";
    const lane = document.createElement("div");
    lane.className = "lane";
    for (const e of r.events) {
      const b = document.createElement("div");
      b.className = "ev " + kind(e) + (e.crit ? " crit" : "");
      b.dataset.i = e.i;
      b.dataset.node = e.node;
      b.title = `${e.name} (${e.op}, ${e.phase}${e.mb >= 0 ? ", micro-batch " + e.mb : ""}, layer ${e.layer}): ` +
        `${e.dur.toFixed(3)} us at ${e.ts.toFixed(3)} us${e.crit ? ", on the critical path" : ""}`;
      lane.appendChild(b);
      boxes[e.i] = b;
    }
    if (r.tid === COMM) {
      const ex = stats.get(r.pid).exposed;
      row.dataset.nExposed = ex.length;
      for (const [a, b] of ex) {
        const d = document.createElement("div");
        d.className = "xband";
        d.title = `exposed comm ${(b - a).toFixed(3)} us`;
        lane.appendChild(d);
        bands.push({ el: d, a, b });
      }
    }
    row.appendChild(label);
    row.appendChild(lane);
    rowsEl.appendChild(row);
  }

  function laneWidth() { return Math.max(100, rowsEl.clientWidth - LABEL_W); }
  // s: pixels per microsecond, worked out once per draw (reading the width
  // after each box moved would lay the page out once per box)
  function place(el, a, b, minW, s) {
    if (b < v0 || a > v1) { el.style.display = "none"; return; }
    el.style.display = "";
    el.style.left = ((a - v0) * s).toFixed(1) + "px";
    el.style.width = Math.max(minW, (b - a) * s).toFixed(1) + "px";
  }
  function drawAxis(w) {
    const axis = document.getElementById("axis");
    axis.textContent = "";
    const span = v1 - v0, step = Math.pow(10, Math.floor(Math.log10(span / 5)));
    const nice = [1, 2, 5, 10].map((k) => k * step).find((s) => span / s <= 10);
    // ticks at round times since the trace's first task
    for (let x = Math.ceil((v0 - t0) / nice) * nice; x <= v1 - t0; x += nice) {
      const t = document.createElement("div");
      t.className = "tick";
      t.style.left = ((x + t0 - v0) / span * w).toFixed(1) + "px";
      t.textContent = x.toFixed(nice < 1 ? 1 : 0) + " us";
      axis.appendChild(t);
    }
  }
  function draw() {
    const w = laneWidth(), s = w / (v1 - v0);
    for (const e of events) place(boxes[e.i], e.ts, e.end, 1, s);
    for (const x of bands) {
      place(x.el, x.a, x.b, 1, s);
      if (x.el.style.display !== "none") x.el.style.display = null;
    }
    drawAxis(w);
    document.getElementById("window").textContent =
      `window ${(v0 - t0).toFixed(1)} .. ${(v1 - t0).toFixed(1)} us of ${(t1 - t0).toFixed(1)} us`;
  }
  function zoom(f, at) {
    const c = at === undefined ? (v0 + v1) / 2 : at;
    const n0 = c - (c - v0) * f, n1 = c + (v1 - c) * f;
    if (n1 - n0 < 0.01) return;
    v0 = Math.max(t0, n0); v1 = Math.min(Math.max(t1, t0 + 1), n1);
    draw();
  }
  const tl = document.getElementById("timeline");
  tl.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const x = ev.clientX - rowsEl.getBoundingClientRect().left - LABEL_W;
    zoom(ev.deltaY < 0 ? 0.8 : 1.25, v0 + (v1 - v0) * Math.min(1, Math.max(0, x / laneWidth())));
  }, { passive: false });
  let drag = null;
  tl.addEventListener("mousedown", (ev) => { drag = { x: ev.clientX, v0, v1, moved: false }; });
  window.addEventListener("mousemove", (ev) => {
    if (!drag) return;
    const dt = (ev.clientX - drag.x) / laneWidth() * (drag.v1 - drag.v0);
    if (Math.abs(ev.clientX - drag.x) > 3) drag.moved = true;
    v0 = drag.v0 - dt; v1 = drag.v1 - dt;
    draw();
  });
  window.addEventListener("mouseup", () => { setTimeout(() => { drag = null; }, 0); });
  document.getElementById("zoom-in").onclick = () => zoom(0.5);
  document.getElementById("zoom-out").onclick = () => zoom(2);
  document.getElementById("zoom-reset").onclick = () => { v0 = t0; v1 = t1 > t0 ? t1 : t0 + 1; draw(); };
  const toggle = (id, cls) => {
    const box = document.getElementById(id);
    const set = () => document.body.classList.toggle(cls, box.checked);
    box.onchange = set;
    set();
  };
  toggle("show-crit", "show-crit");
  toggle("show-exposed", "show-exposed");
  window.addEventListener("resize", draw);

  // ---- the per-rank table ----
  const tbody = document.querySelector("#summary-table tbody");
  for (const pid of pids) {
    const s = stats.get(pid);
    const tr = document.createElement("tr");
    tr.className = "rank";
    Object.assign(tr.dataset, { rank: pid, busyComputeUs: s.tc.toFixed(3), busyCommUs: s.tm.toFixed(3),
      exposedUs: s.exposedUs.toFixed(3), h: s.h.toFixed(3), nCompute: s.nc, nComm: s.nm });
    for (const v of [procName.get(pid) || "rank " + pid, s.tc.toFixed(1), s.nc, s.tm.toFixed(1), s.nm,
      s.exposedUs.toFixed(1), s.h.toFixed(3), (100 * s.h).toFixed(1) + "%", s.span.toFixed(1)]) {
      const td = document.createElement("td");
      td.textContent = v;
      tr.appendChild(td);
    }
    tbody.appendChild(tr);
  }
  const crit = document.getElementById("critical");
  crit.dataset.nCrit = events.filter((e) => e.crit).length;
  crit.textContent = `Critical path (magenta outline): ${data.critical.n} tasks, ${data.critical.busy_us.toFixed(1)} us ` +
    `of tasks over ${data.critical.span_us.toFixed(1)} us; dependencies from ` +
    data.critical.deps + ". See docs/viewer.md.";
  document.getElementById("source").textContent = "trace " + data.trace +
    (data.graph_file ? ", graph " + data.graph_file : "");

  // ---- the graph: nodes by layer, collapsed ----
  const byNode = new Map();
  for (const e of events) {
    if (!byNode.has(e.node)) byNode.set(e.node, []);
    byNode.get(e.node).push(e);
  }
  let nodes;
  const g = data.graph;
  if (g) {
    nodes = g.nodes.map((n) => ({ id: n.id, name: n.name, op: n.op, phase: n.phase, mb: n.microbatch,
      layer: n.layer, stream: n.stream,
      preds: [...new Set(n.inputs.map((t) => g.tensors[t] ? g.tensors[t].producer : -1).filter((p) => p >= 0))] }));
    for (const [a, b] of g.order_edges || []) if (nodes[b]) nodes[b].preds.push(a);
  } else {
    nodes = [...byNode.values()].map((es) => ({ id: es[0].node, name: es[0].name, op: es[0].op, phase: es[0].phase,
      mb: es[0].mb, layer: es[0].layer, stream: es[0].tid === COMM ? "comm" : "compute",
      preds: [...new Set(es[0].after)] }))
      .sort((a, b) => a.id - b.id);
  }
  const nodeById = new Map(nodes.map((n) => [n.id, n]));
  const layers = [...new Set(nodes.map((n) => n.layer))].sort((a, b) => a - b);
  const tree = document.getElementById("graph-tree");
  const groups = new Map();
  let mismatch = 0;
  for (const e of events) if (!nodeById.has(e.node) || nodeById.get(e.node).name !== e.name) mismatch++;
  Object.assign(tree.dataset, { source: g ? "dump" : "trace", nNodes: nodes.length, nLayers: layers.length,
    nLinked: nodes.filter((n) => byNode.has(n.id)).length, nameMismatch: mismatch });
  document.getElementById("graph-note").textContent = (g ? `The step graph (${data.graph_file}): ${nodes.length} ` +
    "nodes" : `The ${nodes.length} nodes of the graph the trace ran (no --graph dump given)`) + `, grouped by layer (click to ` +
    "expand). A node's tasks are the trace events it ran as, on every rank; click a node to select them." +
    (mismatch ? ` Warning: ${mismatch} events name another node than the graph's (a dump of another ` +
      "configuration?)." : "");
  const usOf = (n) => (byNode.get(n.id) || []).reduce((s, e) => s + e.dur, 0);
  function fillGroup(grp) {
    if (grp.filled) return;
    grp.filled = true;
    const ul = document.createElement("ul");
    for (const n of grp.nodes) {
      const li = document.createElement("li");
      const es = byNode.get(n.id) || [];
      li.className = "node" + (es.length ? "" : " idle");
      li.dataset.node = n.id;
      li.dataset.nEvents = es.length;
      li.textContent = `#${n.id} ${n.name} (${n.op}, ${n.phase}${n.mb >= 0 ? ", mb " + n.mb : ""}, ${n.stream}) ` +
        `${es.length} tasks, ${usOf(n).toFixed(1)} us` + (n.preds.length ? "; after " : "");
      for (const p of n.preds) {
        const a = document.createElement("a");
        a.textContent = "#" + p;
        a.href = "#node=" + p;
        a.onclick = (ev) => { ev.preventDefault(); ev.stopPropagation(); select(p, true); };
        li.appendChild(a);
      }
      li.onclick = () => select(n.id, true);
      ul.appendChild(li);
      grp.items.set(n.id, li);
    }
    grp.el.appendChild(ul);
  }
  for (const L of layers) {
    const members = nodes.filter((n) => n.layer === L);
    const d = document.createElement("details");
    d.dataset.layer = L;
    const s = document.createElement("summary");
    const us = members.reduce((t, n) => t + usOf(n), 0);
    s.textContent = (L < 0 ? "outside the layers" : "layer " + L) + `: ${members.length} nodes, ` +
      `${us.toFixed(1)} us of tasks (summed over ranks)`;
    d.appendChild(s);
    const grp = { el: d, nodes: members, items: new Map(), filled: false };
    d.addEventListener("toggle", () => { if (d.open) fillGroup(grp); });
    groups.set(L, grp);
    tree.appendChild(d);
  }

  // ---- selection: node <-> its tasks ----
  let selected = null;
  function select(id, reveal) {
    document.querySelectorAll(".sel").forEach((el) => el.classList.remove("sel"));
    selected = id;
    const es = byNode.get(id) || [];
    for (const e of es) boxes[e.i].classList.add("sel");
    const n = nodeById.get(id);
    if (n) {
      const grp = groups.get(n.layer);
      fillGroup(grp);
      grp.el.open = true;
      const li = grp.items.get(id);
      li.classList.add("sel");
      if (reveal) li.scrollIntoView({ block: "nearest" });
    }
    const sel = document.getElementById("selection");
    sel.dataset.node = id;
    sel.dataset.nSelected = es.length;
    sel.textContent = `selected #${id} ${n ? n.name : es.length ? es[0].name : ""}: ${es.length} tasks`;
    if (es.length && !es.some((e) => e.end >= v0 && e.ts <= v1)) {
      const w = v1 - v0, c = es[0].ts + es[0].dur / 2;
      v0 = c - w / 2; v1 = c + w / 2;
      draw();
    }
  }
  rowsEl.addEventListener("click", (ev) => {
    const b = ev.target.closest(".ev");
    if (!b || (drag && drag.moved)) return;
    select(Number(b.dataset.node), true);
  });

  draw();
  const m = /#(node|event)=(\d+)/.exec(location.hash);
  if (m && (m[1] === "node" || Number(m[2]) < events.length))
    select(m[1] === "node" ? Number(m[2]) : events[Number(m[2])].node, false);
  document.body.dataset.ready = "1";
  document.body.dataset.nEvents = events.length;
  document.body.dataset.nBoxes = document.querySelectorAll(".ev").length;
})();
