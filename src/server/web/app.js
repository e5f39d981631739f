// unipool's dashboard: plain JavaScript over the REST API (docs/api.md), no
// build step. Pages: overview (the topology drawn by group), queues, jobs
// (list, submit, detail with placement, events, progress charts and log
// tails), nodes, and a sim report viewer. The token is the API's: a tenant
// sees only its queues' jobs, because the API shows it nothing else. Live
// updates come from the watch API (long poll).
"use strict";

const state = { token: sessionStorage.getItem("unipool.token") || "", revision: 0, timer: null };

// ---- DOM and formatting -------------------------------------------------------

// h("td", {class: "num", onclick: f, style: {width: "3px"}}, child, ...)
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "style") Object.assign(el.style, v);
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function svg(tag, attrs, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  for (const c of children.flat(Infinity)) if (c) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

function human(seconds) {
  if (seconds === null || seconds === undefined || !isFinite(seconds)) return "-";
  const s = Math.max(0, Math.round(seconds));
  if (s < 120) return s + "s";
  if (s < 7200) return Math.round(s / 60) + "m";
  if (s < 172800) return (s / 3600).toFixed(1).replace(/\.0$/, "") + "h";
  return (s / 86400).toFixed(1).replace(/\.0$/, "") + "d";
}
const since = (t) => (t ? human((Date.now() - Date.parse(t)) / 1000) : "-");
function elapsed(job) {
  if (!job.started || job.state === "Pending") return "-";
  const end = job.state === "Running" || job.state === "Preempting" || !job.finished ? Date.now() : Date.parse(job.finished);
  return human((end - Date.parse(job.started)) / 1000);
}
const plural = (n, noun) => `${num(n)} ${noun}${n === 1 ? "" : "s"}`;
// "rack r12", or "the rack" for a group named as its tier (the top one).
const groupName = (tierName, name) => (name === tierName ? "the " + tierName : `${tierName} ${name}`);
const stateTag = (s) => h("span", { class: "state " + s }, s);
const num = (n) => (n === undefined || n === null ? "-" : Number(n).toLocaleString("en-US"));

function banner(text) {
  const b = document.getElementById("banner");
  b.hidden = !text;
  b.textContent = text || "";
}

// ---- API ----------------------------------------------------------------------

async function api(method, path, body, type) {
  const headers = { Authorization: "Bearer " + state.token };
  if (body !== undefined) headers["Content-Type"] = type || "application/json";
  const res = await fetch(path, { method, headers, body });
  const text = await res.text();
  let data = text;
  if ((res.headers.get("Content-Type") || "").includes("json")) {
    try { data = JSON.parse(text); } catch (e) { data = text; }
  }
  if (res.status === 401) {
    signOut("The token was refused: " + (data.error ? data.error.message : res.status));
    throw new Error("unauthenticated");
  }
  if (!res.ok) {
    const message = data && data.error ? data.error.message : "HTTP " + res.status;
    const err = new Error(message);
    err.status = res.status;
    throw err;
  }
  return { data, headers: res.headers };
}
const get = async (path) => (await api("GET", path)).data;

// ---- Routing ------------------------------------------------------------------

const pages = {};
function route() {
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, query] = hash.split("?");
  const params = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean);
  if (!state.token) return pages.login();
  let page = parts[0] || "overview";
  if (page === "jobs" && parts[1]) page = "job";
  document.querySelectorAll("header nav a").forEach((a) =>
    a.classList.toggle("active", a.dataset.page === (page === "job" ? "jobs" : page)));
  const render = pages[page] || pages.overview;
  state.current = () => render(params, parts[1]);
  return refresh();
}

async function refresh() {
  if (!state.current) return;
  try {
    const el = await state.current();
    if (el) {
      const main = document.getElementById("main");
      main.replaceChildren(el);
    }
    banner("");
  } catch (e) {
    if (e.message !== "unauthenticated") banner(e.message);
  }
}

function signOut(why) {
  state.token = "";
  sessionStorage.removeItem("unipool.token");
  location.hash = "#/";
  pages.login(why);
}

// ---- Live updates: the watch API -----------------------------------------------

async function watchLoop() {
  const live = document.getElementById("live");
  for (;;) {
    if (!state.token) { await sleep(1000); continue; }
    try {
      if (!state.revision) state.revision = (await get("/v1/summary")).revision;
      const w = await get("/v1/watch?kind=jobs&timeoutSeconds=20&revision=" + state.revision);
      live.classList.add("on");
      state.revision = w.revision;
      if (w.events.length && !state.editing) debounceRefresh();
    } catch (e) {
      live.classList.remove("on");
      if (e.status === 409) state.revision = 0;  // compacted: start again from now
      await sleep(2000);
    }
  }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
function debounceRefresh() {
  clearTimeout(state.timer);
  state.timer = setTimeout(refresh, 300);
}

// ---- Sign in --------------------------------------------------------------------

pages.login = (why) => {
  const input = h("input", { type: "password", id: "token", placeholder: "up_...", size: 50, autocomplete: "off" });
  const form = h("form", { class: "card login", onsubmit: async (ev) => {
    ev.preventDefault();
    state.token = input.value.trim();
    try {
      await get("/v1/summary");
      sessionStorage.setItem("unipool.token", state.token);
      route();
    } catch (e) {
      if (e.message !== "unauthenticated") form.querySelector(".error").textContent = e.message;
    }
  } },
    h("h1", {}, "Sign in"),
    h("p", { class: "muted" }, "An API token (unipool token create; unipool up writes one to DATA/admin.token). It stays in this tab only."),
    h("p", {}, input), h("p", {}, h("button", { class: "primary", type: "submit", id: "signin" }, "Sign in")),
    h("p", { class: "error" }, typeof why === "string" ? why : ""));
  document.getElementById("main").replaceChildren(form);
  input.focus();
};

// ---- Overview: the cluster drawn by topology ---------------------------------------

// Watts per GPU of a group, from the GPUs that report a power draw; null
// when none does (virtual GPUs, no nvidia-smi).
function wattsPerGpu(g) { return g.powerGpus ? g.powerWatts / g.powerGpus : null; }

// The colour of a group: by allocation (blue, darker is fuller), by power
// (orange, darker draws more per GPU, against the most in view; grey: no
// readings), or red as its nodes go down; a group holding the chosen job
// is outlined.
function cellColour(g, mode, maxWatts) {
  if (g.state === "down" || (g.nodes && g.nodesDown === g.nodes)) return "#c4202b";
  if (mode === "state") {
    const bad = g.nodes ? g.nodesDown / g.nodes : 0;
    return bad > 0 ? `hsl(0, 70%, ${70 - 30 * bad}%)` : "#1a7f37";
  }
  if (mode === "power") {
    const w = wattsPerGpu(g);
    return w === null ? "#9aa4ae" : `hsl(28, 85%, ${86 - 50 * (maxWatts ? w / maxWatts : 0)}%)`;
  }
  const f = g.gpus ? g.allocated / g.gpus : 0;
  return `hsl(220, 70%, ${88 - 55 * f}%)`;
}

// A cell reads dark text on a light background.
function lightCell(c, mode, maxWatts) {
  if (mode === "alloc") return c.gpus && c.allocated / c.gpus < 0.45;
  if (mode === "power") { const w = wattsPerGpu(c); return w !== null && (!maxWatts || w / maxWatts < 0.5); }
  return false;
}

function topologyView(view, params, onPick) {
  const mode = params.get("color") || "alloc";
  const job = params.get("job");
  const maxWatts = Math.max(0, ...view.children.map((c) => wattsPerGpu(c) || 0));
  const cells = view.children.map((c) => {
    const isNode = view.childKind === "node";
    const colour = cellColour(c, mode, maxWatts);
    const light = !isNode && lightCell(c, mode, maxWatts);
    const w = wattsPerGpu(c);
    return h("div", {
      class: "cell" + (isNode ? " node" : "") + (job && c.jobGpus > 0 ? " highlight" : ""),
      style: { background: colour, color: light ? "#1d232b" : "#fff" },
      title: `${c.name}: ${c.allocated}/${c.gpus} GPUs allocated, ${c.free} free` +
        (c.nodesDown ? `, ${c.nodesDown} node(s) down` : "") + (job && c.jobGpus ? `, ${c.jobGpus} of job ${job}` : "") +
        (w !== null ? `, ${num(Math.round(c.powerWatts))} W (${Math.round(w)} W per GPU)` : ""),
      onclick: isNode ? null : () => onPick(c),
    },
      h("div", { class: "name" }, c.name),
      h("div", {}, `${num(c.allocated)}/${num(c.gpus)} GPUs`),
      isNode ? h("div", {}, c.state) : h("div", {}, plural(c.nodes, "node") + (c.nodesDown ? `, ${c.nodesDown} down` : "")),
      job && c.jobGpus ? h("div", {}, `job ${job}: ${c.jobGpus}`) : null,
      mode === "power" ? h("div", { class: "power" }, w === null ? "no readings" : `${num(Math.round(c.powerWatts))} W`) : null);
  });
  return h("div", { class: "grid", id: "topology" }, cells);
}

function crumbs(view, base) {
  return h("div", { class: "crumbs" }, view.path.map((p, i) => [
    i ? " / " : "",
    i === view.path.length - 1 ? h("b", {}, groupName(p.tierName, p.name))
      : h("a", { onclick: () => { location.hash = base(p.tier, p.group); } }, groupName(p.tierName, p.name))]));
}

pages.overview = async (params) => {
  const [s, view] = await Promise.all([get("/v1/summary"),
    get(`/v1/topology?${params.get("tier") ? "tier=" + params.get("tier") + "&group=" + (params.get("group") || 0) : ""}`)]);
  const card = (label, big, sub) => h("div", { class: "card" }, h("div", { class: "label" }, label), h("div", { class: "big" }, big), h("div", { class: "muted" }, sub));
  const jobs = s.jobs || {};
  const mode = params.get("color") || "alloc";
  const link = (tier, group, color) => `#/?tier=${tier}&group=${group}&color=${color || mode}`;
  return h("div", {},
    h("h1", {}, "Cluster"),
    h("div", { class: "cards", id: "summary" },
      card("GPUs allocated", num(s.gpus.allocated), `of ${num(s.gpus.total)}`),
      card("GPUs free", num(s.gpus.free), `${num(s.gpus.unavailable)} unavailable`),
      card("Nodes up", num(s.nodes.up), `of ${num(s.nodes.total)}`),
      card("Jobs running", num(jobs.Running || 0), `${num(jobs.Pending || 0)} pending`),
      card("Jobs ended", num((jobs.Succeeded || 0) + (jobs.Failed || 0) + (jobs.Cancelled || 0)), `${num(jobs.Failed || 0)} failed`)),
    h("h2", {}, `Topology: the ${view.childKind}s of ${groupName(view.path[view.path.length - 1].tierName, view.name)}`),
    crumbs(view, (t, g) => link(t, g)),
    h("div", { class: "legend" },
      h("span", {}, "colour by "),
      h("a", { href: link(view.tierIndex, view.index, "alloc") }, mode === "alloc" ? h("b", {}, "allocation") : "allocation"), " · ",
      h("a", { href: link(view.tierIndex, view.index, "state") }, mode === "state" ? h("b", {}, "state") : "state"), " · ",
      h("a", { id: "color-power", href: link(view.tierIndex, view.index, "power") }, mode === "power" ? h("b", {}, "power") : "power"),
      mode === "power" ? [
        h("span", {}, h("span", { class: "swatch", style: { background: "hsl(28,85%,86%)" } }, ""), "low"),
        h("span", {}, h("span", { class: "swatch", style: { background: "hsl(28,85%,36%)" } }, ""), "most W per GPU here"),
        h("span", {}, h("span", { class: "swatch", style: { background: "#9aa4ae" } }, ""), "no readings")] : [
        h("span", {}, h("span", { class: "swatch", style: { background: "hsl(220,70%,88%)" } }, ""), "idle"),
        h("span", {}, h("span", { class: "swatch", style: { background: "hsl(220,70%,33%)" } }, ""), "full")],
      h("span", {}, h("span", { class: "swatch", style: { background: "#c4202b" } }, ""), "down")),
    topologyView(view, params, (c) => { location.hash = link(view.tierIndex - 1, c.index); }));
};

// ---- Queues ----------------------------------------------------------------------------

function quotaBar(q, scale) {
  const pct = (v) => (100 * Math.min(v, scale) / scale).toFixed(2) + "%";
  const inGuarantee = q.guarantee ? Math.min(q.usedGpus, q.guarantee) : q.usedGpus;
  const borrowed = q.usedGpus - inGuarantee;
  return h("div", { class: "bar", title: `${q.usedGpus} used, guarantee ${q.guarantee || "none"}, limit ${q.limit || "none"}, ${q.pendingGpus} pending` },
    h("span", { class: "used", style: { left: "0", width: pct(inGuarantee) } }),
    h("span", { class: "borrowed", style: { left: pct(inGuarantee), width: pct(borrowed) } }),
    h("span", { class: "pending", style: { left: pct(q.usedGpus), width: pct(q.pendingGpus) } }),
    q.guarantee ? h("span", { class: "mark", style: { left: pct(q.guarantee) } }) : null,
    q.limit ? h("span", { class: "limit", style: { left: pct(q.limit) } }) : null);
}

pages.queues = async () => {
  const qs = (await get("/v1/queues")).items;
  const scale = Math.max(1, ...qs.map((q) => Math.max(q.limit, q.guarantee, q.usedGpus + q.pendingGpus)));
  return h("div", {},
    h("h1", {}, "Queues"),
    h("div", { class: "legend" },
      h("span", {}, h("span", { class: "swatch", style: { background: "#2557d6" } }, ""), "used within guarantee"),
      h("span", {}, h("span", { class: "swatch", style: { background: "#7aa0f5" } }, ""), "borrowed"),
      h("span", {}, h("span", { class: "swatch", style: { background: "#f0a000" } }, ""), "pending demand"),
      h("span", {}, "| guarantee"), h("span", { class: "error" }, "| limit")),
    h("table", { id: "queues" },
      h("tr", {}, ["Queue", "Parent", "Use", "Used", "Guarantee", "Limit", "Weight", "Pending jobs", "Running jobs", "Policy"].map((c) => h("th", {}, c))),
      qs.map((q) => h("tr", {},
        h("td", {}, q.name), h("td", {}, q.parent || "-"), h("td", {}, quotaBar(q, scale)),
        h("td", { class: "num" }, num(q.usedGpus)), h("td", { class: "num" }, q.guarantee || "-"),
        h("td", { class: "num" }, q.limit || "-"), h("td", { class: "num" }, q.weight),
        h("td", { class: "num" }, num(q.pendingJobs)), h("td", { class: "num" }, num(q.runningJobs)), h("td", {}, q.policy)))));
};

// ---- Jobs ------------------------------------------------------------------------------

const kSample = `apiVersion: unipool/v1
kind: Job
metadata:
  name: my-job
spec:
  command: [sleep, "600"]
  gpus: 1
  queue: default
`;

pages.jobs = async (params) => {
  const q = new URLSearchParams({ limit: "500" });
  for (const k of ["state", "queue"]) if (params.get(k)) q.set(k, params.get(k));
  const [jobs, queues] = await Promise.all([get("/v1/jobs?" + q), get("/v1/queues")]);
  const text = (params.get("q") || "").toLowerCase();
  const rows = jobs.items.filter((j) => !text || j.name.toLowerCase().includes(text) || String(j.id) === text);
  const setParam = (k, v) => {
    const p = new URLSearchParams(params);
    if (v) p.set(k, v); else p.delete(k);
    location.hash = "#/jobs?" + p;
  };
  const stateSel = h("select", { id: "filter-state", onchange: (e) => setParam("state", e.target.value) },
    ["", "Pending", "Running", "Preempting", "Succeeded", "Failed", "Cancelled"].map((s) =>
      h("option", { value: s, selected: params.get("state") === s }, s || "any state")));
  const queueSel = h("select", { id: "filter-queue", onchange: (e) => setParam("queue", e.target.value) },
    h("option", { value: "" }, "any queue"),
    queues.items.map((x) => h("option", { value: x.name, selected: params.get("queue") === x.name }, x.name)));
  const search = h("input", { id: "filter-text", placeholder: "name or id", value: params.get("q") || "",
    onchange: (e) => setParam("q", e.target.value) });
  return h("div", {},
    h("h1", {}, "Jobs"),
    h("div", { class: "toolbar" }, stateSel, queueSel, search, h("span", { class: "muted" }, `${rows.length} shown`)),
    h("table", { id: "jobs" },
      h("tr", {}, ["ID", "Name", "Queue", "State", "GPUs", "Restarts", "Elapsed", "Age", "Reason / message"].map((c) => h("th", {}, c))),
      rows.map((j) => h("tr", { class: "link", "data-id": j.id, onclick: () => { location.hash = "#/jobs/" + j.id; } },
        h("td", { class: "num" }, j.id), h("td", {}, j.name), h("td", {}, j.queue), h("td", {}, stateTag(j.state)),
        h("td", { class: "num" }, j.spec.gpus), h("td", { class: "num" }, j.restarts), h("td", {}, elapsed(j)),
        h("td", {}, since(j.submitted)), h("td", { class: "muted" }, j.state === "Pending" && j.reason ? j.reason : j.message)))),
    submitForm());
};

function submitForm() {
  // What is typed survives the page's live redraws (state.draft).
  const area = h("textarea", { id: "spec", rows: 11, onfocus: () => { state.editing = true; },
    onblur: () => { state.editing = false; }, oninput: (e) => { state.draft = e.target.value; } },
  state.draft || kSample);
  const out = h("p", { id: "submit-result" });
  const send = async (dry) => {
    try {
      const r = (await api("POST", "/v1/jobs" + (dry ? "?dryRun=true" : ""), area.value, "application/yaml")).data;
      out.className = "";
      out.textContent = dry ? "The spec is valid and can run." : `Submitted job ${r.id}.`;
      if (!dry) { state.editing = false; state.draft = ""; location.hash = "#/jobs/" + r.id; }
    } catch (e) {
      out.className = "error";
      out.textContent = e.message;
    }
  };
  return h("div", {},
    h("h2", {}, "Submit a job"),
    area,
    h("div", { class: "toolbar" },
      h("button", { class: "primary", id: "submit", type: "button", onclick: () => send(false) }, "Submit"),
      h("button", { id: "dry-run", type: "button", onclick: () => send(true) }, "Check (dry run)")),
    out);
}

function lineChart(title, points, key) {
  const pts = points.filter((p) => typeof p[key] === "number");
  if (pts.length < 2) return null;
  const xs = pts.map((p) => Date.parse(p.time)), ys = pts.map((p) => p[key]);
  const [x0, x1] = [Math.min(...xs), Math.max(...xs)], [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  const W = 320, H = 140, pad = 28;
  const X = (x) => pad + (W - pad - 6) * (x1 > x0 ? (x - x0) / (x1 - x0) : 0.5);
  const Y = (y) => H - 18 - (H - 30) * (y1 > y0 ? (y - y0) / (y1 - y0) : 0.5);
  const d = pts.map((p, i) => (i ? "L" : "M") + X(xs[i]).toFixed(1) + " " + Y(ys[i]).toFixed(1)).join(" ");
  const fmt = (v) => (Math.abs(v) >= 1000 ? v.toFixed(0) : Number(v.toPrecision(3)));
  return h("div", { class: "chart" }, h("div", { class: "title" }, `${title} (last ${fmt(ys[ys.length - 1])})`),
    svg("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", "data-series": key },
      svg("path", { d, fill: "none", stroke: "#2557d6", "stroke-width": "1.6" }),
      svg("text", { x: 2, y: 12, "font-size": "10", fill: "#667085" }, fmt(y1)),
      svg("text", { x: 2, y: H - 18, "font-size": "10", fill: "#667085" }, fmt(y0)),
      svg("text", { x: W - 40, y: H - 4, "font-size": "10", fill: "#667085" }, human((x1 - x0) / 1000))));
}

// The events, a run of Checkpointed events folded into one row.
function eventRows(items) {
  const rows = [];
  let run = 0;
  for (const e of items) {
    if (e.type === "Checkpointed" && run > 0) {
      run++;
      rows[rows.length - 1] = { time: e.time, type: e.type, message: `checkpointed ${run} times (last: ${e.message.replace(/^checkpoint written: /, "")})` };
      continue;
    }
    run = e.type === "Checkpointed" ? 1 : 0;
    rows.push(e);
  }
  return rows;
}

pages.job = async (params, id) => {
  const [job, events, progress, diagnosis] = await Promise.all([
    get('/v1/jobs/' + id), get(`/v1/jobs/${id}/events`), get(`/v1/jobs/${id}/progress`),
    get(`/v1/jobs/${id}/diagnosis`)
  ]);
  const tasks = job.tasks.length ? job.tasks : (job.previousRun ? job.previousRun.tasks : []);
  const ranks = [];  // the first rank of each task, and its node
  let first = 0;
  for (const t of tasks) {
    ranks.push({rank: first, node: t.node});
    first += t.gpus.length;
  }
  const ended = ["Succeeded", "Failed", "Cancelled"].includes(job.state);
  const field = (k, v) => [h("dt", {}, k), h("dd", {}, v)];
  const logBox = h("pre", { class: "log", id: "log" }, tasks.length ? "" : "(it has not run yet)");
  const rankSel = h("select", { id: "log-rank", onchange: () => loadLog() },
    ranks.map((r, i) => h("option", { value: i }, `rank ${r.rank} (${r.node})`)));
  const loadLog = async () => {
    if (!tasks.length) return;
    const { rank, node } = ranks[rankSel.value || 0];
    try {
      // Logs live on the node's agent: none to ask (a node without an
      // agent, --assume-nodes-up) is said here rather than asked for.
      if (!(await get("/v1/nodes/" + encodeURIComponent(node))).agentUrl) {
        logBox.textContent = `(node ${node} has no agent to read logs from)`;
        return;
      }
      const text = (await api("GET", `/v1/jobs/${id}/logs?rank=${rank}`)).data;
      const lines = String(text).split("\n");
      logBox.textContent = lines.slice(-200).join("\n") || "(empty)";
      logBox.scrollTop = logBox.scrollHeight;
    } catch (e) {
      logBox.textContent = "(" + e.message + ")";
    }
  };
  loadLog();
  const cancel = h("button", { class: "danger", id: "cancel", type: "button", disabled: ended, onclick: async () => {
    if (!confirm(`Cancel job ${id}?`)) return;
    try { await api("DELETE", "/v1/jobs/" + id); refresh(); } catch (e) { banner(e.message); }
  } }, "Cancel job");
  let placement = null;
  if (job.tasks.length) {
    const view = await get(`/v1/topology?job=${id}`);
    placement = [h("h2", {}, "Placement"), topologyView(view, new URLSearchParams({ job: id }), (c) => {
      location.hash = `#/?tier=${view.tierIndex - 1}&group=${c.index}&job=${id}`;
    }),
    h("table", { id: "tasks" }, h("tr", {}, h("th", {}, "Task"), h("th", {}, "Node"), h("th", {}, "GPUs")),
      job.tasks.map((t, i) => h("tr", {}, h("td", { class: "num" }, i), h("td", {}, t.node), h("td", {}, t.gpus.join(",")))))];
  }
  const charts = [lineChart("loss", progress.items, "loss"), lineChart("throughput", progress.items, "throughput"),
    lineChart("grad norm", progress.items, "gradNorm"), lineChart("step", progress.items, "step")].filter(Boolean);
  return h(
      'div', {},
      h('div', {class: 'toolbar'}, h('h1', {}, `Job ${job.id}: ${job.name}`), stateTag(job.state),
        cancel),
      h('dl', {class: 'fields', id: 'job-fields'}, field('Queue', job.queue),
        field('Owner', job.owner), field('GPUs', job.spec.gpus), field('Submitted', job.submitted),
        field('Started', job.started || '-'), field('Finished', job.finished || '-'),
        field('Elapsed', elapsed(job)),
        field(
            'Checkpoint',
            job.checkpoints ? `${job.lastCheckpoint} (${job.checkpointNote || 'no note'}), ${
                                  job.checkpoints} written` :
                              'none'),
        field(
            'Restarts',
            `${job.restarts} (max ${job.spec.restart.maxRestarts}); ${
                job.disruptions} disruptions; ${job.preemptions} preemptions`),
        field('Lost work', `${num(job.lostGpuSeconds)} GPU-seconds`),
        field(
            'Exit',
            job.exitCode === null && job.exitSignal === null ?
                '-' :
                `${job.exitCode || 0}:${job.exitSignal || 0}`),
        job.state === 'Pending' ?
            field(
                'Reason',
                job.reason + (job.estimatedStart ? `, expected at ${job.estimatedStart}` : '')) :
                                                   null,
        field('Why', job.explain || job.message)),
      h('h2', {}, 'Diagnosis'),
      h('div', {id: 'diagnosis'},
        diagnosis.causes.length ?
            diagnosis.causes.map(
                (c) =>
                    h('div', {class: 'cause'}, h('p', {}, h('strong', {}, c.kind), ': ', c.summary),
                      h('ul', {}, c.evidence.map((e) => h('li', {class: 'muted'}, e))),
                      c.fix ? h('p', {}, 'Fix: ', c.fix) : null)) :
            h('p', {class: 'muted'}, 'Nothing looks wrong (unipool diagnose ' + id + ').')),
      placement, h('h2', {}, 'Progress'),
      charts.length ? h('div', {class: 'charts', id: 'charts'}, charts) :
                      h('p', {class: 'muted'},
                        'No progress reports yet (see docs/operations.md, "What a job sees").'),
      h('h2', {}, 'Log'),
      h('div', {class: 'toolbar'}, rankSel,
        h('button', {type: 'button', onclick: () => loadLog()}, 'Reload')),
      logBox, h('h2', {}, 'Events'),
      h('table', {id: 'events'},
        h('tr', {}, h('th', {}, 'Time'), h('th', {}, 'Type'), h('th', {}, 'Message')),
        eventRows(events.items)
            .map(
                (e) => h(
                    'tr', {}, h('td', {}, e.time), h('td', {}, e.type), h('td', {}, e.message)))));
};

// ---- Nodes -----------------------------------------------------------------------------

pages.nodes = async (params) => {
  const q = params.get("state") ? "?state=" + params.get("state") : "";
  const nodes = (await get("/v1/nodes" + q)).items;
  const shown = nodes.slice(0, 2000);
  return h("div", {},
    h("h1", {}, "Nodes"),
    h("div", { class: "toolbar" },
      h("select", { id: "filter-node-state", onchange: (e) => { location.hash = "#/nodes" + (e.target.value ? "?state=" + e.target.value : ""); } },
        ["", "up", "cordoned", "drained", "flaky", "down"].map((s) => h("option", { value: s, selected: params.get("state") === s }, s || "any state"))),
      h("span", { class: "muted" }, nodes.length > shown.length ? `${shown.length} of ${nodes.length} shown (the overview draws them all by group)` : `${nodes.length} nodes`)),
    h("table", { id: "nodes" },
      h("tr", {}, ["Node", "State", "GPUs", "Used", "Free", "Jobs", "Partition", "Model", "Health", "Why", "Heartbeat"].map((c) => h("th", {}, c))),
      shown.map((n) => h("tr", {},
        h("td", {}, n.name), h("td", {}, stateTag(n.state)), h("td", { class: "num" }, n.gpus),
        h("td", { class: "num" }, n.gpusAllocated), h("td", { class: "num" }, n.gpusFree),
        h("td", { class: "jobs" }, (n.jobs || []).map((id, i) => [i ? ", " : "", h("a", { href: "#/jobs/" + id }, String(id))])),
        h("td", {}, n.partition), h("td", {}, n.gpuModel), h("td", {}, stateTag(n.health)), h("td", { class: "muted" }, n.why || ""),
        h("td", {}, since(n.lastHeartbeat))))));
};

// ---- Sim report --------------------------------------------------------------------------

pages.report = async () => {
  const frame = h("iframe", { class: "report", id: "report", sandbox: "", hidden: true });
  const input = h("input", { type: "file", id: "report-file", accept: ".html,text/html", onchange: () => {
    const file = input.files[0];
    if (!file) return;
    frame.src = URL.createObjectURL(file);
    frame.hidden = false;
  } });
  return h("div", {},
    h("h1", {}, "Simulation report"),
    h("p", { class: "muted" }, "Open the HTML report of a simulation (unipool sim ... --report report.html, docs/sim.md). It is shown here, sandboxed; nothing is uploaded."),
    h("p", {}, input), frame);
};

// ---- Start --------------------------------------------------------------------------------

document.getElementById("logout").addEventListener("click", () => signOut(""));
window.addEventListener("hashchange", route);
route();
watchLoop();
