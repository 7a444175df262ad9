// corral's admin console. It calls the internal API (corral.v1.RoomService)
// with Connect's JSON protocol over fetch, with the key the operator typed,
// kept in this variable only. Every view polls at most once a second or
// two, one call at a time, and asks for bounded pages.

"use strict";

const API = "/corral.v1.RoomService/";
const ROOMS_PAGE = 1000; // one page of Rooms per refresh; past it: narrow the filter
const TAIL_KEEP = 200; // lines kept in the live tail
const HISTORY_PAGE = 20;
const CODES = [
  ["CODE_GOING_AWAY", 4000, "resume"],
  ["CODE_UNAVAILABLE", 4103, "retry later"],
  ["CODE_FORBIDDEN", 4403, "stop"],
  ["CODE_UNAUTHENTICATED", 4401, "stop"],
  ["CODE_UNSUBSCRIBED", 4409, "stop"],
];

let key = ""; // the API key: memory only
let timer = 0; // the current view's poll
let view = ""; // the current view's name, to drop late answers of another
const $ = (id) => document.getElementById(id);

class APIError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

async function call(method, req = {}) {
  const res = await fetch(API + method, {
    method: "POST",
    headers: { "Content-Type": "application/json", "Connect-Protocol-Version": "1", Authorization: `Bearer ${key}` },
    body: JSON.stringify(req),
    credentials: "omit",
  });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new APIError(body.code || `http ${res.status}`, body.message || res.statusText);
  return body;
}

function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(e.dataset, v);
    else e[k] = v;
  }
  for (const c of children) e.append(c instanceof Node ? c : String(c ?? ""));
  return e;
}

function status(msg) {
  $("status").textContent = msg || "";
}

function failed(e) {
  if (e instanceof APIError && e.code === "unauthenticated") {
    signOut("The key was refused: " + e.message);
    return;
  }
  status(`${e.code || "error"}: ${e.message}`);
}

// ---- sign in ----

$("signin-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  key = $("key").value.trim();
  $("key").value = "";
  if (!key) {
    $("signin-error").textContent = "Type the API key.";
    return;
  }
  try {
    await call("Info");
  } catch (e) {
    key = "";
    $("signin-error").textContent = e.code === "unauthenticated" ? "Key refused." : `Cannot reach the API: ${e.message}`;
    return;
  }
  $("signin-error").textContent = "";
  $("signin").hidden = true;
  $("nav").hidden = false;
  route();
});

$("signout").addEventListener("click", () => signOut(""));

function signOut(why) {
  key = "";
  stop();
  for (const p of document.querySelectorAll(".page")) p.hidden = true;
  $("nav").hidden = true;
  $("signin").hidden = false;
  $("signin-error").textContent = why;
}

// ---- routing: #overview, #rooms, #room/<name>, #connections, #config ----

window.addEventListener("hashchange", () => key && route());

function stop() {
  clearTimeout(timer);
  timer = 0;
}

// poll runs fn now and then every ms after each answer (never two at once).
// A success clears the status line only when a poll's failure is on it,
// never an action's outcome.
let pollFailed = false;
function poll(name, fn, ms) {
  const tick = async () => {
    try {
      await fn();
      if (view === name && pollFailed) {
        pollFailed = false;
        status("");
      }
    } catch (e) {
      if (view === name) {
        pollFailed = true;
        failed(e);
      }
    }
    if (view === name && key) timer = setTimeout(tick, ms);
  };
  tick();
}

function route() {
  stop();
  const [page, ...rest] = (location.hash.slice(1) || "overview").split("/");
  const arg = decodeURIComponent(rest.join("/"));
  for (const p of document.querySelectorAll(".page")) p.hidden = p.id !== page;
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.hash === `#${page}` || (page === "room" && a.hash === "#rooms"));
  view = `${page}/${arg}`;
  status("");
  ({ overview, rooms, room, connections, config })[page]?.(view, arg);
}

// ---- rates: from each room's last seq between two polls ----

const seen = new Map(); // room -> {seq, at}
function rateOf(r, now) {
  const seq = Number(r.lastSeq || 0);
  const prev = seen.get(r.name);
  seen.set(r.name, { seq, at: now });
  if (!prev || now <= prev.at || seq < prev.seq) return 0;
  return ((seq - prev.seq) * 1000) / (now - prev.at);
}

let classes = []; // the config's classes, for the class of a room
async function loadClasses() {
  classes = (await call("Config")).classes || [];
}
function classOf(room) {
  for (const c of classes) {
    if ((c.rooms || []).some((p) => new RegExp("^" + p.split("*").map(escapeRe).join(".*") + "$").test(room))) return c;
  }
  return classes.find((c) => c.name === "default") || { name: "default", settings: [] };
}
const escapeRe = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

// ---- overview ----

function overview(name) {
  poll(
    name,
    async () => {
      const [info, rooms] = await Promise.all([call("Info", { everyCore: true }), call("Rooms", { limit: ROOMS_PAGE, everyCore: true }), nodeHealth()]);
      const now = performance.now();
      let rate = 0;
      let deliveries = 0;
      for (const r of rooms.rooms || []) {
        const x = rateOf(r, now);
        rate += x;
        deliveries += x * (r.members || 0);
      }
      const nodes = info.nodes || [];
      $("ov-conns").textContent = nodes.filter((n) => n.role === "core").reduce((sum, n) => sum + (n.connections || 0), 0);
      $("ov-cores").textContent = info.coresMissing ? `${info.coresMissing} core(s) did not answer in time` : "";
      $("ov-rooms").textContent = (rooms.rooms || []).length + (rooms.nextPageToken ? "+" : "");
      $("ov-rate").textContent = rate.toFixed(1);
      $("ov-deliv").textContent = deliveries.toFixed(1);
      $("ov-nodes").replaceChildren(
        ...nodes.map((n) =>
          el("tr", {}, el("td", {}, n.role), el("td", { className: "mono" }, n.id), el("td", {}, n.version || "?"), el("td", {}, duration(Number(n.uptimeMs || 0))), el("td", {}, n.connections || 0), el("td", {}, n.rooms || 0)),
        ),
      );
    },
    2000,
  );
}

// The node's own refusal and drop counters, by reason, from /metrics.
const DROPS = /^(corral_(?:core|edge|api)_(?:refused|dropped|events_dropped|slow_consumers|unauthenticated)_total)\{reason="([^"]*)"\} (\S+)$/;
const dropsSeen = new Map(); // "metric reason" -> {value, at}

async function nodeHealth() {
  const ready = await fetch("/readyz", { credentials: "omit" }).catch(() => null);
  $("ov-ready").textContent = ready ? (ready.ok ? "ready" : `not ready (${(await ready.text()).trim()})`) : "unreachable";
  const res = await fetch("/metrics", { headers: { Authorization: `Bearer ${key}` }, credentials: "omit" });
  if (!res.ok) return;
  const now = performance.now();
  const rows = [];
  for (const line of (await res.text()).split("\n")) {
    const m = DROPS.exec(line);
    if (!m) continue;
    const value = Number(m[3]);
    const id = `${m[1]} ${m[2]}`;
    const prev = dropsSeen.get(id);
    dropsSeen.set(id, { value, at: now });
    if (value === 0) continue;
    const rate = prev && now > prev.at ? ((value - prev.value) * 1000) / (now - prev.at) : 0;
    rows.push(el("tr", { dataset: { metric: m[1], reason: m[2] } }, el("td", { className: "mono" }, m[1]), el("td", {}, m[2]), el("td", {}, value), el("td", {}, rate.toFixed(1))));
  }
  $("ov-drops").replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colSpan: 4, className: "muted" }, "none"))]));
}

function duration(ms) {
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

// ---- rooms ----

let roomsFilter = "";
$("rooms-filter").addEventListener("input", () => {
  roomsFilter = $("rooms-filter").value.trim();
});
$("rooms-sort").addEventListener("change", () => location.hash === "#rooms" && route());

async function rooms(name) {
  await loadClasses().catch(failed);
  poll(
    name,
    async () => {
      // A plain word searches names containing it; one with "*" is a pattern.
      const pattern = roomsFilter === "" ? "" : roomsFilter.includes("*") ? roomsFilter : `*${roomsFilter}*`;
      const res = await call("Rooms", { pattern, limit: ROOMS_PAGE, everyCore: true });
      const now = performance.now();
      const list = (res.rooms || []).map((r) => ({ ...r, rate: rateOf(r, now) }));
      const by = $("rooms-sort").value;
      list.sort((a, b) => (by === "name" ? a.name.localeCompare(b.name) : by === "members" ? (b.members || 0) - (a.members || 0) : b.rate - a.rate || (b.members || 0) - (a.members || 0)));
      $("rooms-more").textContent = res.nextPageToken ? `first ${ROOMS_PAGE} rooms by name: narrow the filter` : `${list.length} rooms`;
      $("rooms-list").replaceChildren(
        ...list.map((r) =>
          el(
            "tr",
            { className: "link", dataset: { room: r.name }, onclick: () => (location.hash = `#room/${encodeURIComponent(r.name)}`) },
            el("td", {}, r.name),
            el("td", {}, classOf(r.name).name),
            el("td", {}, r.members || 0),
            el("td", {}, r.rate.toFixed(1)),
            el("td", {}, r.lastSeq || 0),
          ),
        ),
      );
    },
    1500,
  );
}

// ---- one room ----

let current = ""; // the room shown
let oldest = 0; // the oldest seq shown in the history pane

async function room(name, roomName) {
  current = roomName;
  $("room-name").textContent = roomName;
  $("tail").replaceChildren();
  $("history").replaceChildren();
  oldest = 0;
  try {
    await loadClasses();
  } catch (e) {
    failed(e);
  }
  const c = classOf(roomName);
  $("room-class").textContent = `class ${c.name}`;
  $("room-settings").replaceChildren(...(c.settings || []).map((s) => el("li", {}, s)));
  olderHistory();
  // The tail starts at the room's newest message and follows it.
  let after = -1;
  let lastMembers = 0;
  poll(
    name,
    async () => {
      if (after < 0) after = Number((await call("History", { room: roomName, reverse: true, limit: 1 })).lastSeq || 0);
      const h = await call("History", { room: roomName, afterSeq: String(after), limit: 100 });
      for (const m of h.messages || []) addLine($("tail"), m, true);
      // A growing message is one entry at its last chunk: page by nextSeq.
      after = Math.max(after, Number(h.nextSeq || 0));
      // Members and signals: every other poll.
      if (Date.now() - lastMembers > 1500) {
        lastMembers = Date.now();
        await Promise.all([members(roomName), signals(roomName)]);
      }
    },
    1000,
  );
}

// bytesText decodes base64 (the API's JSON for bytes) as UTF-8 text.
function bytesText(b64) {
  try {
    return new TextDecoder().decode(Uint8Array.from(atob(b64 || ""), (ch) => ch.charCodeAt(0)));
  } catch {
    return "(binary)";
  }
}

function payloadText(m) {
  return bytesText(m.payload);
}

// A growing message (m.chunk) comes from History as one entry at the seq
// of its last chunk: its body assembled so far (chunk.data, with replace
// set), its version, and final once it is finished (docs/MESSAGES.md).
function addLine(list, m, tail) {
  const c = m.chunk;
  const li = el("li", { dataset: { seq: m.seq } }, el("span", { className: "seq" }, `#${m.seq}`), m.sender ? `${m.sender}: ` : "");
  if (c) {
    const grow = `${m.id}@${c.messageSeq || 0}`;
    li.dataset.grow = grow;
    li.dataset.state = c.final ? "final" : "open";
    li.append(bytesText(c.data), " ", el("span", { className: `grow ${c.final ? "final" : "open"}`, title: `growing message ${m.id}, version ${c.version || 0}` }, c.final ? "finished" : "growing"));
    // The tail sees an open message again at each later chunk: one line
    // per message, the newest body, where its last chunk is.
    for (const old of list.querySelectorAll("li[data-grow]")) if (old.dataset.grow === grow) old.remove();
  } else li.append(payloadText(m));
  if (tail) {
    list.append(li);
    while (list.children.length > TAIL_KEEP) list.firstChild.remove();
    list.scrollTop = list.scrollHeight;
  } else list.append(li);
}

async function olderHistory() {
  if (oldest === 1) return;
  const req = { room: current, reverse: true, limit: HISTORY_PAGE };
  if (oldest > 0) req.beforeSeq = String(oldest);
  try {
    const h = await call("History", req);
    for (const m of h.messages || []) addLine($("history"), m, false);
    if (h.nextSeq) oldest = Number(h.nextSeq);
    $("history-older").disabled = !h.more;
  } catch (e) {
    failed(e);
  }
}
$("history-older").addEventListener("click", olderHistory);

async function signals(roomName) {
  const res = await call("Signals", { room: roomName, limit: 50, everyCore: true });
  const list = (res.signals || []).map((s) => el("li", { dataset: { key: s.key } }, `${s.key} = ${signalText(s)}`));
  if (res.more) list.push(el("li", { className: "muted" }, "… more keys"));
  $("signals").replaceChildren(...list);
}

// A signal's payload: inline JSON in the API's JSON (a Struct or value).
function signalText(s) {
  const p = s.payload;
  if (p === undefined) return "";
  return typeof p === "string" ? payloadText({ payload: p }) : JSON.stringify(p);
}

async function members(roomName) {
  const res = await call("Members", { room: roomName, everyCore: true });
  $("room-conns").textContent = `${res.connections || 0} connections` + (res.coresMissing ? ` (${res.coresMissing} core(s) did not answer)` : "");
  $("members").replaceChildren(
    ...(res.members || []).map((m) =>
      el(
        "tr",
        { dataset: { user: m.userId } },
        el("td", {}, m.userId),
        el("td", { className: "mono" }, (m.sessionIds || []).map((s) => s.slice(0, 8)).join(" ")),
        el(
          "td",
          {},
          el("button", { type: "button", className: "disconnect", onclick: () => act(() => disconnect({ userId: m.userId }, $("member-code").value, "disconnected from the console")) }, "disconnect"),
          " ",
          el("button", { type: "button", className: "unsubscribe", onclick: () => act(() => call("Unsubscribe", { userId: m.userId, rooms: [roomName] })) }, "unsubscribe"),
        ),
      ),
    ),
  );
  $("presence").replaceChildren(...(res.presence || []).map((p) => el("li", {}, `${p.userId} (${p.connections || 0})`)));
}

$("publish-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = $("publish-payload").value;
  act(async () => {
    const bytes = new TextEncoder().encode(text);
    await call("Publish", { room: current, payload: btoa(String.fromCharCode(...bytes)), sender: "console" });
    $("publish-payload").value = "";
  });
});

async function act(fn) {
  status("");
  try {
    await fn();
  } catch (e) {
    failed(e);
  }
}

function disconnect(target, code, reason) {
  return call("Disconnect", { ...target, code, reason, everyCore: true });
}

// ---- connections ----

let found = null; // the target of the last look-up
function connections() {
  $("conn-disconnect").disabled = !found;
}

$("conn-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const id = $("conn-id").value.trim();
  if (!id) return;
  found = { [$("conn-by").value]: id };
  act(async () => {
    const res = await call("Connections", { ...found, limit: 100, everyCore: true });
    const list = res.connections || [];
    $("conn-list").replaceChildren(
      ...(list.length
        ? list.map((c) => el("tr", { dataset: { session: c.sessionId } }, el("td", { className: "mono" }, c.sessionId), el("td", {}, c.userId), el("td", { className: "mono" }, c.edgeId || ""), el("td", {}, c.protocol || ""), el("td", {}, c.attachedMs ? new Date(Number(c.attachedMs)).toISOString().slice(11, 19) : ""), el("td", {}, (c.rooms || []).join(", ")), el("td", {}, c.queued || 0)))
        : [el("tr", {}, el("td", { colSpan: 7, className: "muted" }, "no connection"))]),
    );
    $("conn-disconnect").disabled = list.length === 0;
  });
});

$("conn-disconnect").addEventListener("click", () =>
  act(async () => {
    const res = await disconnect(found, $("conn-code").value, $("conn-reason").value);
    status(`closed ${(res.sessionIds || []).length} connection(s)`);
    $("conn-disconnect").disabled = true;
  }),
);

// ---- config ----

function config(name) {
  poll(name, showConfig, 5000);
}

async function showConfig() {
  const c = await call("Config");
  classes = c.classes || [];
  $("cfg-version").textContent = c.version || "(none)";
  $("cfg-hash").textContent = c.hash || "(none)";
  $("cfg-loaded").textContent = c.loadedMs ? new Date(Number(c.loadedMs)).toISOString() : "—";
  const r = c.lastReload;
  $("cfg-last").textContent = r ? `${r.reloaded ? "ok" : "refused"} at ${new Date(Number(r.atMs)).toISOString()}${r.error ? ": " + r.error : ""}` : "none since start";
  $("cfg-last").className = r && !r.reloaded ? "error" : "";
  $("cfg-reload").disabled = !c.reloadable;
  $("cfg-classes").replaceChildren(
    ...classes.map((k) => el("div", { dataset: { class: k.name } }, el("h2", {}, k.name, " ", el("small", { className: "muted" }, (k.rooms || []).join(", ") || "(unmatched rooms)")), el("ul", { className: "mono" }, ...(k.settings || []).map((s) => el("li", {}, s))))),
  );
}

$("cfg-reload").addEventListener("click", () =>
  act(async () => {
    const res = await call("Reload", { everyCore: true });
    await showConfig();
    const others = res.others || [];
    const ok = others.filter((o) => o.reloaded).length;
    status(`this node: ${res.reloaded ? "reloaded" : "refused"}; other cores' nodes: ${ok} of ${others.length} reloaded` + (res.coresMissing ? `, ${res.coresMissing} did not answer` : ""));
  }),
);

for (const s of document.querySelectorAll("select.codes")) {
  s.replaceChildren(...CODES.map(([n, v, advice]) => el("option", { value: n }, `${v} ${n.slice(5).toLowerCase()} (${advice})`)));
}
$("key").focus();
