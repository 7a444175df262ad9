// corral's demo page: a shared canvas of live cursors (signals), a chat in
// one order for everyone (messages), and who is here (a "here:<user>"
// signal that the server clears when its connection goes). It uses only the
// SDK in corral.js, built from clients/js.

import { Client } from "./corral.js";

const params = new URLSearchParams(location.search);
const room = params.get("room") || "lobby";
const me = params.get("name") || sessionStorage.getItem("corral-demo:name") || randomName();
sessionStorage.setItem("corral-demo:name", me);

const $ = (id) => document.getElementById(id);
const board = $("board");
const cursorsEl = $("cursors");
const messagesEl = $("messages");
const outboxEl = $("outbox");
const scrollEl = $("scroll");
const input = $("text");

const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws`;
// With `corral serve --insecure-dev` the token is the user id.
// ?transport=sse (or stream, websocket; several comma-separated, in order)
// forces the transports to try; by default the SDK falls back by itself.
const transports = params.get("transport")?.split(",").filter(Boolean);
const client = new Client({ url, token: me, clientName: "corral-demo", ...(transports ? { transports } : {}) });
window.corral = client;
window.demo = { room, me };

$("room-name").textContent = room;
$("me-name").textContent = me;
document.querySelector(".you").style.setProperty("--user", colorOf(me));

// ---- connection state ----

let reconnectAt = 0;
let countdown = 0;
client.on("state", (s) => {
  const el = $("status");
  el.dataset.state = s.state;
  clearInterval(countdown);
  const text = $("status-text");
  switch (s.state) {
    case "open":
      text.textContent = "live";
      break;
    case "connecting":
      text.textContent = "connecting…";
      break;
    case "reconnecting": {
      reconnectAt = Date.now() + (s.delayMs ?? 0);
      const tick = () => {
        const left = Math.max(0, reconnectAt - Date.now());
        text.textContent = left > 400 ? `reconnecting in ${(left / 1000).toFixed(1)}s` : "reconnecting…";
      };
      tick();
      countdown = setInterval(tick, 200);
      break;
    }
    case "closed":
      text.textContent = s.code === 4004 ? "open in another tab" : "offline";
      el.title = s.reason ?? "";
      if (s.code === 4401) {
        note("This server verifies tokens: the demo needs `corral serve --insecure-dev`.");
      }
      break;
  }
});

// Which transport carries the connection: a WebSocket, or a fallback when
// a proxy refused or stalled it.
client.on("transport", (t) => {
  $("status").dataset.transport = t.transport;
  if (t.failed.length > 0) note(`Connected over ${t.transport}: ${t.failed.map((f) => f.transport).join(", ")} did not get through.`);
});

let everOpen = false;
client.on("welcome", (w) => {
  $("conn-info").textContent = `${client.transport} · corral.v1.json · ${url} · session ${w.sessionId.slice(0, 8)}`;
  if (everOpen || w.resumed) {
    note(w.resumed ? "Reconnected: session resumed, nothing missed." : "Reconnected with a new session.");
  }
  everOpen = true;
});

client.on("error", (e) => console.warn("corral:", e.code, e.message));

// ---- chat: messages, in the room's order ----

const transcriptKey = `corral-demo:chat:${room}`;
const transcript = loadTranscript();
for (const m of transcript) renderMessage(m);

client.on("message", (m) => {
  if (m.room !== room || m.chunk) return; // chunks: the assistant panel
  const text = m.payload && typeof m.payload === "object" && "text" in m.payload ? String(m.payload.text) : JSON.stringify(m.payload);
  const item = { seq: m.seq, sender: m.sender, text, timeMs: m.timeMs, id: m.id };
  outboxEl.querySelector(`[data-id="${CSS.escape(m.id)}"]`)?.remove();
  renderMessage(item);
  transcript.push(item);
  if (transcript.length > 200) transcript.splice(0, transcript.length - 200);
  saveTranscript();
  seen(m.sender);
});

// ---- assistant: growing messages (docs/MESSAGES.md), such as the answers
// examples/assistant streams through the internal API. A page that joins
// in the middle gets the answer so far as one chunk, then the rest; a
// reload resumes after what it saw, and the SDK asks for the answers still
// open there (RoomPosition.open_prefix): the page keeps no copy of those.
// Finished answers are kept like the chat transcript (what the page has
// shown), and shown again after a reload.

const answersEl = $("answers");
const answersKey = `corral-demo:answers-done:${room}`;
const answers = client.room(room);

function answerEl(id) {
  let el = answersEl.querySelector(`[data-id="${CSS.escape(id)}"]`);
  if (!el) {
    el = document.createElement("p");
    el.className = "answer";
    el.dataset.id = id;
    answersEl.append(el);
  }
  $("assistant").hidden = false;
  return el;
}

function loadDone() {
  try {
    return JSON.parse(sessionStorage.getItem(answersKey) || "[]");
  } catch {
    return [];
  }
}

function saveDone(g) {
  const done = loadDone().filter((a) => a.id !== g.id);
  done.push({ id: g.id, version: g.version, text: g.text });
  try {
    sessionStorage.setItem(answersKey, JSON.stringify(done.slice(-5)));
  } catch {
    // A full storage only costs the finished answers on reload.
  }
}

for (const a of loadDone()) {
  const el = answerEl(a.id);
  el.textContent = a.text;
  el.dataset.version = String(a.version);
  el.dataset.final = "true";
}

answers.on("growing", (g) => {
  const el = answerEl(g.id);
  const show = () => {
    el.textContent = g.text;
    el.dataset.version = String(g.version);
    el.dataset.final = String(g.final);
    if (g.final) saveDone(g);
  };
  g.on("chunk", show);
  show();
});
answers.on("gap", (e) => console.warn("corral: assistant:", e.message));

client.on("reset", (r) => {
  if (r.room === room) note("Some history was no longer available; the chat continues from here.");
});

$("compose").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = input.value.trim();
  if (!text) return;
  input.value = "";
  setTyping(false);
  const id = `${me}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 6)}`;
  const li = messageElement({ sender: me, text, timeMs: Date.now() }, false);
  li.classList.add("pending");
  li.dataset.id = id;
  outboxEl.append(li);
  scrollDown(true);
  client.publish(room, { text }, { id }).catch((e) => {
    li.classList.add("failed");
    li.title = e.message;
  });
});

function renderMessage(m) {
  const prev = messagesEl.lastElementChild;
  const cont = prev && prev.dataset.sender === m.sender && m.timeMs - Number(prev.dataset.time) < 120_000;
  messagesEl.append(messageElement(m, cont));
  scrollDown(false);
}

function messageElement(m, cont) {
  const li = document.createElement("li");
  li.className = cont ? "msg cont" : "msg";
  if (m.seq) li.dataset.seq = String(m.seq);
  li.dataset.sender = m.sender;
  li.dataset.time = String(m.timeMs);
  li.style.setProperty("--user", colorOf(m.sender));
  const time = new Date(m.timeMs).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  li.innerHTML = `<span class="avatar"></span><div class="body"><div class="meta"><b></b><time></time></div><div class="text"></div></div>`;
  li.querySelector(".avatar").textContent = initials(m.sender);
  li.querySelector("b").textContent = m.sender;
  li.querySelector("time").textContent = time;
  li.querySelector(".text").textContent = m.text;
  return li;
}

function note(text) {
  const li = document.createElement("li");
  li.className = "note";
  li.innerHTML = "<span></span>";
  li.firstChild.textContent = text;
  messagesEl.append(li);
  scrollDown(false);
}

function scrollDown(force) {
  const near = scrollEl.scrollHeight - scrollEl.scrollTop - scrollEl.clientHeight < 80;
  if (force || near) scrollEl.scrollTop = scrollEl.scrollHeight;
}

function loadTranscript() {
  try {
    return JSON.parse(sessionStorage.getItem(transcriptKey) || "[]");
  } catch {
    return [];
  }
}

function saveTranscript() {
  try {
    sessionStorage.setItem(transcriptKey, JSON.stringify(transcript));
  } catch {
    // A full storage only costs the transcript on reload.
  }
}

// ---- cursors: signals, latest value wins ----

const cursors = new Map(); // user -> { el, x, y }

board.addEventListener("pointermove", (ev) => {
  const r = board.getBoundingClientRect();
  const x = round((ev.clientX - r.left) / r.width);
  const y = round((ev.clientY - r.top) / r.height);
  client.signal(room, `cursor:${me}`, { x, y });
});
board.addEventListener("pointerleave", () => client.clearSignal(room, `cursor:${me}`));

function showCursor(user, x, y) {
  let c = cursors.get(user);
  if (!c) {
    const el = document.createElement("div");
    el.className = "cursor";
    el.dataset.user = user;
    el.style.setProperty("--user", colorOf(user));
    el.innerHTML = `<svg viewBox="0 0 24 24"><path d="M4 2.5 19.5 11l-7 1.6L9 19.5z"/></svg><span class="label"></span>`;
    el.querySelector(".label").textContent = user;
    cursorsEl.append(el);
    c = { el, x, y };
    cursors.set(user, c);
    c.el.style.transition = "none"; // appear in place, then glide
    requestAnimationFrame(() => (c.el.style.transition = ""));
  }
  c.x = x;
  c.y = y;
  placeCursor(c);
  board.classList.toggle("busy", cursors.size > 0);
}

function placeCursor(c) {
  c.el.style.transform = `translate(${c.x * board.clientWidth - 3}px, ${c.y * board.clientHeight - 2}px)`;
  c.el.dataset.x = String(c.x);
  c.el.dataset.y = String(c.y);
}

function hideCursor(user) {
  cursors.get(user)?.el.remove();
  cursors.delete(user);
  board.classList.toggle("busy", cursors.size > 0);
}

new ResizeObserver(() => cursors.forEach(placeCursor)).observe(board);

// ---- who is here, and who is typing ----

const people = new Map(); // user -> { typing }
people.set(me, { typing: false });
renderPeople();

client.on("signal", (s) => {
  if (s.room !== room) return;
  const colon = s.key.indexOf(":");
  const kind = s.key.slice(0, colon);
  const user = s.key.slice(colon + 1);
  if (user === me) return;
  switch (kind) {
    case "cursor":
      if (s.clear || !s.payload) hideCursor(user);
      else showCursor(user, Number(s.payload.x), Number(s.payload.y));
      break;
    case "here":
      if (s.clear) {
        people.delete(user);
        hideCursor(user);
      } else seen(user);
      break;
    case "typing":
      seen(user);
      people.get(user).typing = !s.clear && !!s.payload;
      break;
  }
  renderPeople();
});

function seen(user) {
  if (!people.has(user)) people.set(user, { typing: false });
}

function renderPeople() {
  const list = $("people");
  list.replaceChildren();
  const names = [...people.keys()].sort((a, b) => (a === me ? -1 : b === me ? 1 : a.localeCompare(b)));
  for (const name of names) {
    const li = document.createElement("li");
    li.dataset.user = name;
    li.style.setProperty("--user", colorOf(name));
    if (name === me) li.className = "self";
    li.innerHTML = `<span class="avatar"></span><span class="n"></span>`;
    li.querySelector(".avatar").textContent = initials(name);
    li.querySelector(".n").textContent = name;
    if (name === me) li.insertAdjacentHTML("beforeend", `<span class="you">(you)</span>`);
    list.append(li);
  }
  $("people-count").textContent = String(people.size);
  const typing = names.filter((n) => n !== me && people.get(n).typing);
  $("typing").textContent =
    typing.length === 0 ? "" : typing.length === 1 ? `${typing[0]} is typing…` : `${typing.join(", ")} are typing…`;
}

let typing = false;
input.addEventListener("input", () => setTyping(input.value.trim() !== ""));
input.addEventListener("blur", () => setTyping(false));
function setTyping(on) {
  if (on === typing) return;
  typing = on;
  if (on) client.signal(room, `typing:${me}`, true);
  else client.clearSignal(room, `typing:${me}`);
}

// ---- go ----

client.connect();
client.join(room).then(() => client.signal(room, `here:${me}`, { since: Date.now() }), (e) => note(`Could not join: ${e.message}`));

// ---- helpers ----

function round(v) {
  return Math.round(Math.min(1, Math.max(0, v)) * 1000) / 1000;
}

function colorOf(name) {
  let h = 2166136261;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619);
  // Equal perceived lightness for every hue, dark enough for white text.
  return `oklch(0.56 0.17 ${(h >>> 0) % 360})`;
}

function initials(name) {
  const parts = name.split(/[-_\s.]+/).filter(Boolean);
  return ((parts[0]?.[0] ?? "?") + (parts[1]?.[0] ?? "")).slice(0, 2);
}

function randomName() {
  const a = ["amber", "brisk", "calm", "dapper", "eager", "fuzzy", "gentle", "happy", "jolly", "keen", "lucky", "merry", "nimble", "plucky", "quiet", "rosy", "sunny", "tidy", "witty", "zesty"];
  const b = ["otter", "badger", "heron", "lynx", "panda", "fox", "koala", "moose", "owl", "yak", "gecko", "puffin", "bison", "lemur", "alpaca", "hare", "ibis", "quokka", "tapir", "wren"];
  const pick = (xs) => xs[Math.floor(Math.random() * xs.length)];
  return `${pick(a)}-${pick(b)}`;
}
