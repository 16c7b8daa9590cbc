// omnieval dashboard: plain JS, no network beyond this server (or none at all in a static export).
"use strict";
(function () {
  const embedded = document.getElementById("omnieval-data");
  const STATIC = embedded ? JSON.parse(embedded.textContent) : null;
  const FILTERS = ["modality", "engine", "framework", "model"];
  const PALETTE = ["#3b6fd8", "#e0662f", "#2f9e5a", "#b8428c", "#8a6ad6", "#c9a227", "#1f9bb0", "#7a7f8c"];
  const SVGNS = "http://www.w3.org/2000/svg";
  const state = { lb: null, runs: [], radarModels: null, radarBenchOff: null, radarPicked: false, colors: {}, seq: 0 };

  const $ = (id) => document.getElementById(id);
  function el(tag, attrs, ...kids) {
    const n = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v == null || v === false) continue;
      if (k === "class") n.className = v; else if (k === "text") n.textContent = v; else n.setAttribute(k, v);
    }
    for (const k of kids) if (k != null) n.append(k instanceof Node ? k : String(k));
    return n;
  }
  function svg(tag, attrs) {
    const n = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) n.setAttribute(k, v);
    return n;
  }
  const fmt = (v) => (v == null ? "—" : Number(v).toFixed(1));
  const Z95 = 1.96;
  // 95 % interval of a score on 0-100 from its standard error (clipped to the scale), null without one
  const ci95 = (v, se) => (v == null || se == null ? null : [Math.max(0, v - Z95 * se), Math.min(100, v + Z95 * se)]);
  function errorBar(v, se) {
    const ci = ci95(v, se);
    if (!ci) return null;
    return el("span", { class: "ebar", title: `95% interval ${fmt(ci[0])}–${fmt(ci[1])}` },
      el("i", { class: "ebar-ci", style: `left:${ci[0]}%;width:${Math.max(0.5, ci[1] - ci[0])}%` }),
      el("i", { class: "ebar-dot", style: `left:${Math.max(0, Math.min(100, v))}%` }));
  }
  const createdKey = (s) => { const t = Date.parse(s); return Number.isNaN(t) ? -Infinity : t; };
  const cmp = (a, b) => (a < b ? -1 : a > b ? 1 : 0);

  // ---- data access: the JSON API, or the embedded export (same shapes) -------------------------------------
  async function api(path, params) {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(params || {})) if (v !== "" && v != null) qs.set(k, v);
    const r = await fetch(path + (qs.toString() ? "?" + qs : ""), { cache: "no-store" });
    if (!r.ok) throw new Error(`${path}: HTTP ${r.status}`);
    return r.json();
  }

  // Mirror of _index.build_leaderboard for the static export; tests check both agree.
  function buildLeaderboard(cells, filters) {
    const f = {};
    for (const k of FILTERS) if (filters[k]) f[k] = filters[k];
    const matches = (c, ff) => Object.entries(ff).every(([k, v]) => c[k] === v);
    const noModel = Object.assign({}, f); delete noModel.model;
    const colCells = cells.filter((c) => matches(c, noModel));
    const rowCells = colCells.filter((c) => matches(c, f));
    const benches = {}, metrics = {};
    for (const c of colCells) {
      if (!benches[c.benchmark] || createdKey(c.created) > createdKey(benches[c.benchmark].created)) benches[c.benchmark] = c;
      if (c.metric) (metrics[c.benchmark] = metrics[c.benchmark] || new Set()).add(c.metric);
    }
    const names = Object.keys(benches).sort(cmp);
    const grid = {};
    for (const c of rowCells) (grid[c.model] = grid[c.model] || {})[c.benchmark] = c;
    const models = Object.entries(grid).map(([name, row]) => {
      const ver = Object.values(row).map((c) => c.verifier).filter((v) => v != null);
      const cellsOut = {};
      for (const b of names) cellsOut[b] = row[b] || null;
      return {
        name, engines: [...new Set(Object.values(row).map((c) => c.engine))].sort(cmp), cells: cellsOut,
        mean_verifier: ver.length ? ver.reduce((a, b) => a + b, 0) / ver.length : null,
        coverage: names.length ? (100 * Object.keys(row).length) / names.length : 0, num_cells: Object.keys(row).length,
      };
    });
    models.sort((a, b) => (a.mean_verifier == null) - (b.mean_verifier == null) ||
      (b.mean_verifier || 0) - (a.mean_verifier || 0) || cmp(a.name, b.name));
    const options = {};
    for (const k of FILTERS) options[k] = [...new Set(cells.map((c) => c[k]))].sort(cmp);
    return {
      benchmarks: names.map((b) => ({ name: b, modality: benches[b].modality, framework: benches[b].framework,
        metric: metrics[b] ? [...metrics[b]].sort(cmp).join("/") : null })),
      models, options, applied: f,
      radar_default: rowCells.some((c) => c.verifier != null) ? "verifier" : "value",
    };
  }

  function staticCompare(runA, runB, bench, modelA, modelB) {
    const side = (run, model) => {
      const recs = (STATIC.samples[run] || []).filter((s) => s.benchmark === bench);
      const models = [...new Set(recs.map((s) => s.model))].sort(cmp);
      const chosen = model || models[0] || null;
      const byIdx = new Map(recs.filter((s) => s.model === chosen).map((s) => [s.index, s]));
      return { chosen, models, byIdx };
    };
    const a = side(runA, modelA), b = side(runB, modelB);
    const idx = [...new Set([...a.byIdx.keys(), ...b.byIdx.keys()])].sort((x, y) => x - y);
    return {
      run_a: runA, run_b: runB, benchmark: bench, model_a: a.chosen, model_b: b.chosen,
      models_a: a.models, models_b: b.models, total: idx.length, offset: 0, limit: idx.length,
      pairs: idx.map((i) => ({ benchmark: bench, index: i, a: a.byIdx.get(i) || null, b: b.byIdx.get(i) || null })),
      paired: (STATIC.paired || {})[[runA, a.chosen, runB, b.chosen, bench].join("|")] || null,
    };
  }

  const getLeaderboard = (f) => (STATIC ? Promise.resolve(buildLeaderboard(STATIC.cells, f)) : api("api/leaderboard", f));
  const getRuns = () => (STATIC ? Promise.resolve(STATIC.runs) : api("api/runs"));
  const getCompare = (a, b, bench, ma, mb) => STATIC ? Promise.resolve(staticCompare(a, b, bench, ma, mb))
    : api("api/compare", { run_a: a, run_b: b, benchmark: bench, model_a: ma, model_b: mb, limit: 200 });

  // ---- filters ---------------------------------------------------------------------------------------------
  function currentFilters() {
    const f = {};
    for (const k of FILTERS) f[k] = $("filter-" + k).value;
    return f;
  }
  function fillSelect(sel, values, keep, allLabel) {
    const prev = keep ? sel.value : "";
    sel.replaceChildren();
    if (allLabel != null) sel.append(el("option", { value: "", text: allLabel }));
    for (const v of values) sel.append(el("option", { value: v, text: v }));
    if ([...sel.options].some((o) => o.value === prev)) sel.value = prev;
  }

  // ---- leaderboard -----------------------------------------------------------------------------------------
  function colorOf(model) {
    if (!(model in state.colors)) state.colors[model] = PALETTE[Object.keys(state.colors).length % PALETTE.length];
    return state.colors[model];
  }
  function heat(v) {
    if (v == null) return null;
    const x = Math.max(0, Math.min(100, v)) / 100;
    return `hsla(${Math.round(8 + 120 * x)}, 62%, 88%, 1)`;
  }
  function renderLeaderboard(lb) {
    const head = el("tr", {}, el("th", { text: "#" }), el("th", { text: "Model" }), el("th", { text: "Engine" }),
      el("th", { text: "Mean verifier" }), el("th", { text: "Coverage" }));
    for (const b of lb.benchmarks) {
      head.append(el("th", { "data-benchmark": b.name }, b.name,
        el("span", { class: "sub", text: [b.metric || "verifier only", b.modality, b.framework].join(" · ") })));
    }
    $("leaderboard").tHead.replaceChildren(head);
    const body = $("leaderboard").tBodies[0];
    body.replaceChildren();
    lb.models.forEach((m, i) => {
      const cov = Math.round(m.coverage);
      const tr = el("tr", { "data-model": m.name },
        el("td", { class: "muted", text: i + 1 }),
        el("td", { class: "model" }, el("i", { style: `display:inline-block;width:9px;height:9px;border-radius:2px;margin-right:6px;background:${colorOf(m.name)}` }), m.name),
        el("td", { class: "muted", text: m.engines.join(", ") }),
        el("td", { class: "mean", text: fmt(m.mean_verifier) }),
        el("td", { class: "coverage" }, el("span", { class: "cov" },
          el("span", { class: "bar" }, el("i", { style: `width:${cov}%` })), `${cov}%`)));
      for (const b of lb.benchmarks) {
        const c = m.cells[b.name];
        if (!c) {
          tr.append(el("td", { class: "gap", "data-benchmark": b.name, title: `${m.name} was not evaluated on ${b.name}`, text: "—" }));
          continue;
        }
        const extra = Object.entries(c.verifiers || {}).filter(([k]) => k !== "verifier");
        const se = c.metric ? c.stderr : c.verifier_stderr, shown = c.metric ? c.value : c.verifier;
        const ci = ci95(shown, se);
        const title = `${c.metric || "verifier"} · run ${c.run_id} · ${c.engine} · ${c.framework} · ${c.num_samples} samples` +
          (se != null ? ` · ± ${fmt(se)} (${c.metric ? c.stderr_method || "stderr" : "mean"}), 95% ${fmt(ci[0])}–${fmt(ci[1])}` : "") +
          (c.num_errors ? ` · ${c.num_errors} errors` : "") + extra.map(([k, v]) => ` · ${k} ${fmt(v)}`).join("");
        const bg = heat(c.verifier != null ? c.verifier : c.value);
        tr.append(el("td", { class: "score", "data-benchmark": b.name, title, style: bg ? `background:${bg}` : null },
          el("span", { class: "native", text: fmt(shown) }),
          se != null ? el("span", { class: "se", text: `± ${fmt(se)}` }) : null,
          errorBar(shown, se),
          el("span", { class: "ver", text: "✓ " + fmt(c.verifier) + (c.verifier_stderr != null ? ` ± ${fmt(c.verifier_stderr)}` : "") }),
          ...extra.map(([k, v]) => el("span", { class: "ver ver-extra", "data-metric": k, text: `${k.replace(/^verifier_?/, "")} ${fmt(v)}` })),
          c.num_errors ? el("span", { class: "err", text: `⚠ ${c.num_errors} err` }) : null));
      }
      body.append(tr);
    });
    $("leaderboard-empty").hidden = lb.models.length > 0;
  }

  // ---- radar -----------------------------------------------------------------------------------------------
  function checkboxes(fs, names, isOn, setOn) {
    fs.querySelectorAll("label").forEach((n) => n.remove());
    for (const name of names) {
      const box = el("input", { type: "checkbox", value: name });
      box.checked = isOn(name);
      box.addEventListener("change", () => { setOn(name, box.checked); renderRadar(); });
      fs.append(el("label", {}, box, name));
    }
  }
  // The user's choice outlives filters: models are remembered as chosen, benchmarks as switched off,
  // so narrowing and then clearing a filter gives the same chart back and new benchmarks show up on their own.
  function syncRadarSelection(lb) {
    const models = lb.models.map((m) => m.name), benches = lb.benchmarks.map((b) => b.name);
    if (!state.radarModels) state.radarModels = new Set(models.slice(0, 3));
    if (!models.some((n) => state.radarModels.has(n))) models.slice(0, 3).forEach((n) => state.radarModels.add(n));
    state.radarBenchOff = state.radarBenchOff || new Set();
    if (benches.every((b) => state.radarBenchOff.has(b))) benches.forEach((b) => state.radarBenchOff.delete(b));
    const pick = (set) => (name, on) => (on ? set.add(name) : set.delete(name));
    checkboxes($("radar-models"), models, (n) => state.radarModels.has(n), pick(state.radarModels));
    checkboxes($("radar-benchmarks"), benches, (b) => !state.radarBenchOff.has(b),
      (b, on) => pick(state.radarBenchOff)(b, !on));
  }
  function renderRadar() {
    const lb = state.lb, root = $("radar"), key = $("radar-metric").value;
    root.replaceChildren();
    $("radar-legend").replaceChildren();
    if (!lb) return;
    const axes = lb.benchmarks.map((b) => b.name).filter((b) => !state.radarBenchOff.has(b));
    const models = lb.models.filter((m) => state.radarModels.has(m.name));
    const cx = 280, cy = 240, R = 170, n = axes.length;
    if (!n || !models.length) {
      root.append(Object.assign(svg("text", { x: cx, y: cy, "text-anchor": "middle", class: "radar-label" }),
        { textContent: "Select at least one model and one benchmark" }));
      return;
    }
    const pt = (i, v) => {
      const a = -Math.PI / 2 + (2 * Math.PI * i) / n, r = (R * Math.max(0, Math.min(100, v))) / 100;
      return [cx + r * Math.cos(a), cy + r * Math.sin(a)];
    };
    for (const level of [20, 40, 60, 80, 100]) {
      const pts = axes.map((_, i) => pt(i, level).join(",")).join(" ");
      root.append(n >= 3 ? svg("polygon", { points: pts, class: "radar-grid" })
        : svg("circle", { cx, cy, r: (R * level) / 100, class: "radar-grid" }));
      if (level === 100) continue; // the top axis label sits there
      const t = svg("text", { x: cx + 3, y: cy - (R * level) / 100 - 2, class: "radar-tick" });
      t.textContent = level; root.append(t);
    }
    axes.forEach((b, i) => {
      const [x, y] = pt(i, 100), [lx, ly] = pt(i, 116);
      root.append(svg("line", { x1: cx, y1: cy, x2: x, y2: y, class: "radar-axis" }));
      const anchor = Math.abs(lx - cx) < 8 ? "middle" : lx > cx ? "start" : "end";
      const t = svg("text", { x: lx, y: ly + 4, "text-anchor": anchor, class: "radar-label" });
      t.textContent = b; root.append(t);
    });
    for (const m of models) {
      const color = colorOf(m.name);
      const vals = axes.map((b) => (m.cells[b] ? m.cells[b][key] : null));
      const pts = vals.map((v, i) => pt(i, v == null ? 0 : v).join(",")).join(" ");
      const poly = svg("polygon", { points: pts, class: "radar-series", "data-model": m.name, fill: color, stroke: color });
      const title = svg("title", {}); title.textContent = m.name; poly.append(title);
      root.append(poly);
      const seKey = key === "verifier" ? "verifier_stderr" : "stderr";
      vals.forEach((v, i) => {  // the 95 % interval as a whisker along the benchmark's axis
        const ci = ci95(v, m.cells[axes[i]] ? m.cells[axes[i]][seKey] : null);
        if (!ci) return;
        const [x1, y1] = pt(i, ci[0]), [x2, y2] = pt(i, ci[1]);
        const bar = svg("line", { x1, y1, x2, y2, stroke: color, class: "radar-errbar", "data-model": m.name,
          "data-benchmark": axes[i] });
        const tt = svg("title", {}); tt.textContent = `${m.name} · ${axes[i]}: 95% ${fmt(ci[0])}–${fmt(ci[1])}`;
        bar.append(tt); root.append(bar);
      });
      vals.forEach((v, i) => {
        const [x, y] = pt(i, v == null ? 0 : v);
        const dot = svg("circle", { cx: x, cy: y, r: v == null ? 4 : 3.5, fill: color, stroke: color,
          class: v == null ? "radar-gap" : "radar-point" });
        const tt = svg("title", {}); tt.textContent = `${m.name} · ${axes[i]}: ${v == null ? "not evaluated" : fmt(v)}`;
        dot.append(tt); root.append(dot);
      });
      $("radar-legend").append(el("span", {}, el("i", { style: `background:${color}` }), m.name));
    }
    if (root.querySelector(".radar-errbar")) $("radar-legend").append(el("span", { class: "muted", text: "whiskers: 95% interval" }));
    if (models.some((m) => axes.some((b) => !m.cells[b])))
      $("radar-legend").append(el("span", { class: "muted", text: "○ at centre = not evaluated" }));
    if (n < 3) $("radar-legend").append(el("span", { class: "muted", text: "pick 3+ benchmarks for a full radar" }));
  }

  // ---- runs + compare --------------------------------------------------------------------------------------
  function renderRuns(runs) {
    $("runs").tHead.replaceChildren(el("tr", {}, ...["Run", "Suite", "Status", "Created", "Models", "Benchmarks"]
      .map((h) => el("th", { text: h }))));
    $("runs").tBodies[0].replaceChildren(...runs.map((r) => el("tr", { "data-run": r.run_id },
      el("td", {}, el("code", { text: r.run_id })), el("td", { text: r.suite_name || "" }),
      el("td", { title: r.error || null }, el("span", { class: "badge " + r.status, text: r.status })),
      el("td", { class: "muted", text: (r.created || "").replace("T", " ").slice(0, 19) }),
      el("td", { text: (r.models || []).map((m) => `${m.name} (${m.engine})`).join(", ") }),
      el("td", { text: (r.benchmarks || []).map((b) => b.name).join(", ") }))));
    const withRecs = runs.filter((r) => r.has_records);
    const ids = withRecs.map((r) => r.run_id);
    fillSelect($("compare-run-a"), ids, true);
    fillSelect($("compare-run-b"), ids, true);
    if (ids.length > 1 && $("compare-run-a").value === $("compare-run-b").value) $("compare-run-b").value = ids[1];
    syncCompareBenchmarks();
  }
  function syncCompareBenchmarks() {
    const find = (id) => state.runs.find((r) => r.run_id === id);
    const a = find($("compare-run-a").value), b = find($("compare-run-b").value);
    const names = (r) => new Set(((r && r.benchmarks) || []).map((x) => x.name));
    const na = names(a), nb = names(b);
    const both = [...na].filter((x) => nb.has(x));
    fillSelect($("compare-benchmark"), (both.length ? both : [...new Set([...na, ...nb])]).sort(cmp), true);
  }
  function scoreOf(s) {
    if (!s) return null;
    const vals = Object.values(s.metrics || {}).filter((v) => v != null);
    return vals.length ? vals[0] : null;
  }
  function sampleCell(s) {
    if (!s) return el("td", { class: "gap", text: "—", title: "sample missing in this run" });
    const score = scoreOf(s);
    const metrics = Object.entries(s.metrics || {}).map(([k, v]) => `${k}=${v == null ? "—" : +v.toFixed(3)}`).join(" ");
    return el("td", {}, el("pre", { text: s.prediction_postprocessed ?? s.prediction ?? "(no output)" }),
      el("span", { class: score == null ? "muted" : score > 0 ? "ok" : "bad", text: metrics || "no metrics" }),
      s.error ? el("div", { class: "bad", text: `${s.error.kind}: ${s.error.message}` }) : null);
  }
  // Side by side: each run's score with its error bar on one 0-100 scale, then B − A with its 95 % interval
  // against 0 (the paired test of `omnieval compare`).
  function renderPaired(p) {
    const root = $("compare-stats");
    root.replaceChildren();
    if (!p) return;
    const side = (label, s, mean) => {
      const v = s && s.value != null ? s.value : mean, se = s ? s.stderr : null;
      return el("div", { class: "stat-row", "data-side": label },
        el("span", { class: "stat-label", text: label }),
        el("span", { class: "stat-value", text: fmt(v) + (se != null ? ` ± ${fmt(se)}` : "") }),
        el("span", { class: "stat-track" }, errorBar(v, se)));
    };
    if (!p.n) {  // each run's own score and error still, but no difference to test
      root.append(side("A", p.score_a, null), side("B", p.score_b, null), el("p", { class: "muted", text: p.note }));
      return;
    }
    const lo = p.ci_low, hi = p.ci_high, span = Math.max(5, Math.abs(lo ?? 0), Math.abs(hi ?? 0), Math.abs(p.diff)) * 1.1;
    const pos = (x) => 50 + (50 * x) / span;
    const diffBar = lo == null ? null : el("span", { class: "ebar diff-bar", title: `95% interval ${fmt(lo)} to ${fmt(hi)}` },
      el("i", { class: "zero", style: "left:50%" }),
      el("i", { class: "ebar-ci", style: `left:${pos(lo)}%;width:${Math.max(0.5, pos(hi) - pos(lo))}%` }),
      el("i", { class: "ebar-dot", style: `left:${pos(p.diff)}%` }));
    const sign = p.diff > 0 ? "+" : "";
    root.append(side("A", p.score_a, p.mean_a), side("B", p.score_b, p.mean_b),
      el("div", { class: "stat-row", "data-side": "diff" },
        el("span", { class: "stat-label", text: "B − A" }),
        el("span", { class: "stat-value", text: `${sign}${fmt(p.diff)}` + (lo == null ? "" : ` [${fmt(lo)}, ${fmt(hi)}]`) }),
        el("span", { class: "stat-track" }, diffBar)),
      el("p", { class: p.significant ? "ok" : "muted", "data-significant": p.significant ? "1" : "0",
        text: `${p.metric} · ${p.n} pairs · ${p.method}` + (p.p_value == null ? "" : ` · p = ${Number(p.p_value).toPrecision(3)}`) +
          (p.significant ? " · significant at 5%" : " · not significant at 5%") }));
  }
  async function runCompare() {
    const a = $("compare-run-a").value, b = $("compare-run-b").value, bench = $("compare-benchmark").value;
    if (!a || !b || !bench) { $("compare-summary").textContent = "Pick two runs with records and a benchmark."; return; }
    const res = await getCompare(a, b, bench, $("compare-model-a").value, $("compare-model-b").value);
    fillSelect($("compare-model-a"), res.models_a, false); $("compare-model-a").value = res.model_a || "";
    fillSelect($("compare-model-b"), res.models_b, false); $("compare-model-b").value = res.model_b || "";
    $("compare").tHead.replaceChildren(el("tr", {}, el("th", { text: "#" }), el("th", { text: "Prompt" }),
      el("th", { text: "Label" }), el("th", { text: `A: ${res.model_a || "—"} @ ${a}` }),
      el("th", { text: `B: ${res.model_b || "—"} @ ${b}` })));
    let aWins = 0, bWins = 0, missing = 0;
    const rows = res.pairs.map((p) => {
      const sa = scoreOf(p.a), sb = scoreOf(p.b);
      if (!p.a || !p.b) missing++; else if (sa > sb) aWins++; else if (sb > sa) bWins++;
      const src = p.a || p.b;
      return el("tr", { class: p.a && p.b && sa !== sb ? "diff" : null, "data-index": p.index },
        el("td", { class: "muted", text: p.index }),
        el("td", {}, el("pre", { text: (src.prompt || "").slice(0, 400) + (src.media.length ? `\n[${src.media.map((m) => m.type).join(", ")}]` : "") })),
        el("td", {}, el("pre", { text: typeof src.label === "string" ? src.label : JSON.stringify(src.label) })),
        sampleCell(p.a), sampleCell(p.b));
    });
    $("compare").tBodies[0].replaceChildren(...rows);
    renderPaired(res.paired);
    $("compare-summary").textContent = `${res.total} aligned samples · A better on ${aWins} · B better on ${bWins}` +
      ` · ${missing} present in only one run` + (res.total > res.pairs.length ? ` · showing first ${res.pairs.length}` : "");
  }

  // ---- refresh loop ----------------------------------------------------------------------------------------
  async function refresh() {
    const seq = ++state.seq;
    try {
      const [lb, runs] = await Promise.all([getLeaderboard(currentFilters()), getRuns()]);
      if (seq !== state.seq) return; // a newer filter change is in flight; its answer wins
      state.lb = lb; state.runs = runs;
      for (const k of FILTERS) fillSelect($("filter-" + k), lb.options[k], true, "all");
      renderLeaderboard(lb);
      syncRadarSelection(lb);
      // the verifier score only where some run has one, else each benchmark's headline metric; a pick sticks
      if (!state.radarPicked) $("radar-metric").value = lb.radar_default;
      renderRadar();
      renderRuns(runs);
      const when = STATIC ? `static export, generated ${STATIC.generated}` : `updated ${new Date().toLocaleTimeString()}`;
      const count = (k, w) => `${k} ${w}${k === 1 ? "" : "s"}`;
      $("status").textContent = [count(runs.length, "run"), count(lb.models.length, "model"),
        count(lb.benchmarks.length, "benchmark"), when].join(" · ");
      document.body.dataset.ready = "1";
    } catch (e) {
      $("status").textContent = "error: " + e.message;
    }
  }

  for (const k of FILTERS) $("filter-" + k).addEventListener("change", refresh);
  $("filter-reset").addEventListener("click", () => { for (const k of FILTERS) $("filter-" + k).value = ""; refresh(); });
  $("reload").addEventListener("click", refresh);
  $("radar-metric").addEventListener("change", () => { state.radarPicked = true; renderRadar(); });
  for (const side of ["a", "b"]) $("compare-run-" + side).addEventListener("change", () => {
    $("compare-model-" + side).replaceChildren(); // the other run's models don't apply
    syncCompareBenchmarks();
  });
  $("compare-benchmark").addEventListener("change", () => {
    for (const side of ["a", "b"]) $("compare-model-" + side).replaceChildren();
  });
  $("compare-go").addEventListener("click", runCompare);
  refresh().then(() => { if ($("compare-benchmark").value) runCompare(); });
  // New runs land in the artifacts dir while the page is open; the server rescans per request.
  if (!STATIC) setInterval(() => { if (document.visibilityState === "visible") refresh(); }, 15000);
})();
