import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, mock, test } from "node:test";
import { Client, Code, CorralError, type ClientOptions, type ConnectionState } from "../src/index.js";
import { FakeSocket, MemoryStorage, settle } from "./fakes.js";

const URL_ = "ws://corral.test/ws";

beforeEach(() => {
  FakeSocket.all = [];
  mock.timers.enable({ apis: ["setTimeout", "setInterval", "Date"], now: 1_000_000 });
  // The SDK times intervals on performance.now() (src/clock.ts), which
  // node:test's timers do not mock: let it follow the mocked Date.
  mock.method(performance, "now", () => Date.now());
});
afterEach(() => {
  mock.timers.reset();
  mock.restoreAll();
});

function newClient(opts: Partial<ClientOptions> = {}): { c: Client; states: ConnectionState[]; storage: MemoryStorage } {
  const storage = (opts.storage as MemoryStorage | undefined) ?? new MemoryStorage();
  // One transport: these tests are about the state machine on a
  // connection; transport.test.ts has the fallbacks.
  const c = new Client({ url: URL_, token: "alice", WebSocket: FakeSocket, storage, random: () => 0.5, transports: ["websocket"], ...opts });
  const states: ConnectionState[] = [];
  c.on("state", (s) => states.push(s.state));
  return { c, states, storage };
}

const welcome = (over: Record<string, unknown> = {}) => ({
  welcome: { sessionId: "s1", resumeToken: "t1", userId: "alice", heartbeatMs: 25_000, sessionTtlMs: 60_000, ...over },
});

/** connect, open the socket, and answer the hello. */
async function connected(c: Client, over: Record<string, unknown> = {}): Promise<FakeSocket> {
  c.connect();
  await settle();
  const ws = FakeSocket.last;
  ws.open();
  ws.serve(welcome(over));
  return ws;
}

/** publish once in a room and answer it: until then the client sends one
 * publish of the room at a time (its places start at 1 again). */
async function started(c: Client, ws: FakeSocket, room = "lobby") {
  const p = c.publish(room, "first");
  const f = ws.framesOf("publish").at(-1)!;
  ws.serve({ published: { room, id: f["id"], seq: 1 } });
  await p;
}

/** join a room and answer it. */
async function joined(c: Client, ws: FakeSocket, room = "lobby", seq = 0) {
  const p = c.join(room);
  ws.serve({ joined: { room, seq, epoch: "e1" } });
  return p;
}

describe("connect and hello", () => {
  test("sends hello with the token, then is open on welcome", async () => {
    const { c, states } = newClient();
    c.connect();
    await settle();
    const ws = FakeSocket.last;
    assert.equal(ws.url, URL_);
    assert.equal(ws.protocols, "corral.v1.json");
    ws.open();
    assert.deepEqual(ws.sent, [{ hello: { token: "alice", client: "corral-js/0.1.0" } }]);
    ws.serve(welcome());
    assert.equal(c.state, "open");
    assert.equal(c.sessionId, "s1");
    assert.deepEqual(states, ["connecting", "open"]);
  });

  test("a token function is asked before every connection", async () => {
    let n = 0;
    const { c } = newClient({ token: async () => `tok${++n}` });
    const ws = await connected(c);
    assert.equal(ws.framesOf("hello")[0]!["token"], "tok1");
    ws.drop();
    mock.timers.tick(1000);
    await settle();
    FakeSocket.last.open();
    assert.equal(FakeSocket.last.framesOf("hello")[0]!["token"], "tok2");
  });

  test("joins sent after welcome; publishes wait for their room", async () => {
    const { c } = newClient();
    const joinP = c.join("lobby");
    const pubP = c.publish("lobby", { text: "early" });
    const ws = await connected(c);
    assert.deepEqual(ws.kinds(), ["hello", "join"]);
    ws.serve({ joined: { room: "lobby", seq: 4, epoch: "e1" } });
    assert.deepEqual((await joinP).seq, 4);
    assert.deepEqual(ws.kinds(), ["hello", "join", "publish"]);
    const id = ws.framesOf("publish")[0]!["id"] as string;
    ws.serve({ published: { room: "lobby", id, seq: 5 } });
    assert.equal((await pubP).seq, 5);
  });
});

describe("publish and ack", () => {
  test("resolves on Published; ids are unique and prefixed per client", async () => {
    const { c } = newClient({ random: Math.random });
    const ws = await connected(c);
    await joined(c, ws);
    await started(c, ws);
    const a = c.publish("lobby", { text: "a" });
    const b = c.publish("lobby", { text: "b" });
    const [, fa, fb] = ws.framesOf("publish");
    assert.deepEqual(fa!["payload"], { text: "a" });
    assert.notEqual(fa!["id"], fb!["id"]);
    assert.match(fa!["id"] as string, /^[0-9a-z]{8}-2$/);
    ws.serve({ batch: { frames: [{ published: { room: "lobby", id: fb!["id"], seq: 8 } }, { published: { room: "lobby", id: fa!["id"], seq: 7 } }] } });
    assert.equal((await a).seq, 7);
    assert.equal((await b).seq, 8);
  });

  test("rejects on an Error with its ref", async () => {
    const { c } = newClient();
    const ws = await connected(c);
    await joined(c, ws);
    const p = c.publish("lobby", "x", { id: "mine" });
    ws.serve({ error: { code: Code.TOO_LARGE, message: "payload exceeds the server's limit", room: "lobby", ref: "mine" } });
    await assert.rejects(p, (e: CorralError) => e.code === Code.TOO_LARGE && e.ref === "mine" && e.advice === "stop");
  });

  test("retries a refusal with a retry code after retryAfterMs, same id", async () => {
    const { c } = newClient();
    const ws = await connected(c);
    await joined(c, ws);
    const p = c.publish("lobby", 1, { id: "r1" });
    ws.serve({ error: { code: Code.UNAVAILABLE, message: "busy", room: "lobby", ref: "r1", retryAfterMs: 300 } });
    assert.equal(ws.framesOf("publish").length, 1);
    mock.timers.tick(299);
    assert.equal(ws.framesOf("publish").length, 1);
    mock.timers.tick(1);
    assert.deepEqual(ws.framesOf("publish")[1], { room: "lobby", id: "r1", payload: 1, seq: 1 });
    ws.serve({ published: { room: "lobby", id: "r1", seq: 1 } });
    assert.equal((await p).seq, 1);
  });

  test("gives up after publishRetries", async () => {
    const { c } = newClient({ publishRetries: 2 });
    const ws = await connected(c);
    await joined(c, ws);
    const p = c.publish("lobby", 1, { id: "r1" });
    for (let i = 0; i < 3; i++) {
      ws.serve({ error: { code: Code.RATE_LIMITED, message: "slow down", ref: "r1", retryAfterMs: 100 } });
      mock.timers.tick(10_000);
    }
    await assert.rejects(p, (e: CorralError) => e.code === Code.RATE_LIMITED);
    assert.equal(ws.framesOf("publish").length, 3);
  });

  test("unacknowledged publishes are sent again after a reconnect, same id", async () => {
    const { c } = newClient();
    let ws = await connected(c);
    await joined(c, ws);
    await started(c, ws);
    const p = c.publish("lobby", { text: "in flight" }, { id: "f1" });
    const q = c.publish("lobby", { text: "in flight 2" }, { id: "f2" });
    ws.drop();
    const offline = c.publish("lobby", { text: "offline" }, { id: "f3" });
    mock.timers.tick(1000);
    await settle();
    ws = FakeSocket.last;
    ws.open();
    ws.serve(welcome({ resumed: true }));
    assert.deepEqual(ws.kinds(), ["hello"], "nothing before the room is back");
    ws.serve({ joined: { room: "lobby", seq: 0, epoch: "e1", resumed: true } });
    assert.deepEqual(
      ws.framesOf("publish").map((f) => [f["id"], f["seq"]]),
      [["f1", 2], ["f2", 3], ["f3", 4]],
    );
    ws.serve({ published: { room: "lobby", id: "f1", seq: 1, duplicate: true } });
    ws.serve({ published: { room: "lobby", id: "f2", seq: 2 } });
    ws.serve({ published: { room: "lobby", id: "f3", seq: 3 } });
    assert.deepEqual((await p).duplicate, true);
    assert.equal((await q).seq, 2);
    assert.equal((await offline).seq, 3);
  });

  test("a refused publish holds the later ones: sent again in order, same places", async () => {
    // The bug: each refused publish retried on its own random
    // timer, so a room stored them shuffled. Now the later ones wait for
    // the head and go right after it.
    const { c } = newClient({ random: Math.random });
    const ws = await connected(c);
    await joined(c, ws);
    await started(c, ws);
    ws.sent.length = 0;
    const ps = ["a", "b", "c", "d"].map((id) => c.publish("lobby", id, { id }));
    assert.deepEqual(ws.framesOf("publish").map((f) => [f["id"], f["seq"]]), [["a", 2], ["b", 3], ["c", 4], ["d", 5]]);
    ws.serve({ error: { code: Code.UNAVAILABLE, message: "busy", room: "lobby", ref: "a", retryAfterMs: 200 } });
    ws.serve({ error: { code: Code.UNAVAILABLE, message: "busy", room: "lobby", ref: "b", retryAfterMs: 50 } });
    ws.serve({ error: { code: Code.OUT_OF_ORDER, message: "send 2 first", room: "lobby", ref: "c" } });
    ws.serve({ error: { code: Code.OUT_OF_ORDER, message: "send 3 first", room: "lobby", ref: "d" } });
    mock.timers.tick(150);
    assert.equal(ws.framesOf("publish").length, 4, "nothing overtakes the head while it waits");
    mock.timers.tick(10_000);
    assert.deepEqual(ws.framesOf("publish").slice(4).map((f) => [f["id"], f["seq"]]), [["a", 2], ["b", 3], ["c", 4], ["d", 5]]);
    ["a", "b", "c", "d"].forEach((id, i) => ws.serve({ published: { room: "lobby", id, seq: 10 + i } }));
    assert.deepEqual((await Promise.all(ps)).map((p) => p.seq), [10, 11, 12, 13]);
  });

  test("a publish refused for good gives its place to the next", async () => {
    const { c } = newClient();
    const ws = await connected(c);
    await joined(c, ws);
    await started(c, ws);
    ws.sent.length = 0;
    const a = c.publish("lobby", "x", { id: "a" });
    const b = c.publish("lobby", "y", { id: "b" });
    ws.serve({ error: { code: Code.TOO_LARGE, message: "too large", room: "lobby", ref: "a" } });
    await assert.rejects(a, (e: CorralError) => e.code === Code.TOO_LARGE);
    ws.serve({ error: { code: Code.OUT_OF_ORDER, message: "send 2 first", room: "lobby", ref: "b" } });
    assert.deepEqual(ws.framesOf("publish").map((f) => [f["id"], f["seq"]]), [["a", 2], ["b", 3], ["b", 2]]);
    ws.serve({ published: { room: "lobby", id: "b", seq: 2 } });
    assert.equal((await b).seq, 2);
    c.publish("lobby", "z", { id: "c" });
    assert.deepEqual(ws.framesOf("publish").at(-1)!["seq"], 3);
  });

  test("until a room's first publish is stored, the next waits for it", async () => {
    const { c } = newClient();
    const ws = await connected(c);
    await joined(c, ws);
    const a = c.publish("lobby", 1, { id: "a" });
    c.publish("lobby", 2, { id: "b" });
    assert.deepEqual(ws.framesOf("publish").map((f) => [f["id"], f["seq"]]), [["a", 1]]);
    ws.serve({ published: { room: "lobby", id: "a", seq: 4 } });
    await a;
    assert.deepEqual(ws.framesOf("publish").map((f) => [f["id"], f["seq"]]), [["a", 1], ["b", 2]]);
  });

  test("a publish not answered in publishTimeoutMs is sent again, same id and place", async () => {
    const { c } = newClient({ publishTimeoutMs: 1000 });
    const ws = await connected(c);
    await joined(c, ws);
    const a = c.publish("lobby", 1, { id: "a" });
    mock.timers.tick(999);
    assert.equal(ws.framesOf("publish").length, 1);
    mock.timers.tick(1);
    assert.deepEqual(ws.framesOf("publish").map((f) => [f["id"], f["seq"]]), [["a", 1], ["a", 1]]);
    ws.serve({ published: { room: "lobby", id: "a", seq: 4, duplicate: true } });
    assert.equal((await a).seq, 4);
  });

  test("publish to a room not joined rejects at once", async () => {
    const { c } = newClient();
    await assert.rejects(c.publish("nowhere", 1), (e: CorralError) => e.code === Code.NOT_JOINED);
  });
});

describe("resume", () => {
  test("keeps the session and room positions in storage and resumes from them", async () => {
    const { c, storage, states } = newClient();
    let ws = await connected(c);
    await joined(c, ws, "lobby", 10);
    ws.serve({ batch: { frames: [11, 12].map((seq) => ({ message: { room: "lobby", seq, sender: "bob", payload: { n: seq } } })) } });
    assert.deepEqual(JSON.parse(storage.getItem(`corral:${URL_}`)!), {
      session: { sessionId: "s1", resumeToken: "t1", userId: "alice" },
      rooms: { lobby: { seq: 12, epoch: "e1" } },
    });

    ws.drop(1006);
    assert.equal(c.state, "reconnecting");
    mock.timers.tick(125); // the first retry: immediate plus jitter (0.5 × 250)
    await settle();
    ws = FakeSocket.last;
    assert.equal(FakeSocket.all.length, 2);
    ws.open();
    const { instance, attempt, ...resume } = (ws.sent[0] as { hello: { resume: Record<string, unknown> } }).hello.resume;
    assert.match(String(instance), /^[0-9a-z]{8}$/, "a random instance orders the resume attempts");
    assert.equal(attempt, 1, "the first resume attempt of this client");
    assert.deepEqual(ws.sent[0], {
      hello: {
        token: "alice",
        client: "corral-js/0.1.0",
        resume: { ...resume, instance, attempt },
      },
    });
    assert.deepEqual(resume, { sessionId: "s1", resumeToken: "t1", rooms: [{ room: "lobby", seq: 12, epoch: "e1" }] });
    ws.serve(welcome({ resumed: true }));
    const got: number[] = [];
    c.on("message", (m) => got.push(m.seq));
    ws.serve({
      batch: {
        frames: [
          { joined: { room: "lobby", seq: 12, epoch: "e1", resumed: true } },
          { message: { room: "lobby", seq: 12, sender: "bob" } }, // seen already
          { message: { room: "lobby", seq: 13, sender: "bob" } },
        ],
      },
    });
    assert.deepEqual(got, [13]);
    assert.deepEqual(ws.kinds(), ["hello"], "a resumed session does not join again");
    assert.deepEqual(states, ["connecting", "open", "reconnecting", "open"]);
  });

  test("a resumed room left with a retry code is joined again, from its position", async () => {
    const { c } = newClient();
    let ws = await connected(c);
    await joined(c, ws, "lobby", 12);
    await joined(c, ws, "vip", 3);
    ws.drop(1006);
    mock.timers.tick(125);
    await settle();
    ws = FakeSocket.last;
    ws.open();
    ws.serve(welcome({ resumed: true }));
    const left: string[] = [];
    c.on("left", (l) => left.push(l.room));
    // The server could not load lobby's state now: the session keeps it.
    ws.serve({ left: { room: "lobby", code: Code.UNAVAILABLE, reason: "join failed: store unavailable, resume again later" } });
    ws.serve({ joined: { room: "vip", seq: 3, epoch: "e1", resumed: true } });
    assert.deepEqual(ws.framesOf("join"), [], "not before the retry delay");
    mock.timers.tick(500);
    const again = ws.framesOf("join");
    assert.equal(again.length, 1);
    assert.equal(again[0]!["room"], "lobby");
    assert.equal(again[0]!["sinceSeq"], 12);
    ws.serve({ joined: { room: "lobby", seq: 12, epoch: "e1" } });
    const got: number[] = [];
    c.on("message", (m) => got.push(m.seq));
    ws.serve({ message: { room: "lobby", seq: 13, sender: "bob" } });
    assert.deepEqual(got, [13]);
    assert.deepEqual(left, [], "the app never saw lobby left");
    assert.deepEqual(c.joinedRooms.sort(), ["lobby", "vip"]);
  });

  test("a new Client on the same storage (a reload) resumes", async () => {
    const storage = new MemoryStorage();
    const first = newClient({ storage });
    const ws1 = await connected(first.c);
    await joined(first.c, ws1, "lobby", 3);
    const second = newClient({ storage });
    second.c.connect();
    await settle();
    FakeSocket.last.open();
    const hello = FakeSocket.last.framesOf("hello")[0]!;
    const { instance, attempt, ...resume } = hello["resume"] as Record<string, unknown>;
    assert.match(String(instance), /^[0-9a-z]{8}$/);
    assert.equal(attempt, 1, "a reload is a new instance: its first attempt");
    // A reload kept the position, not the bodies of the growing messages
    // open there: the resume asks for them.
    assert.deepEqual(resume, { sessionId: "s1", resumeToken: "t1", rooms: [{ room: "lobby", seq: 3, epoch: "e1", openPrefix: true }] });
    // The app joins again after a reload; the resumed room answers it.
    const j = second.c.join("lobby");
    FakeSocket.last.serve(welcome({ resumed: true }));
    FakeSocket.last.serve({ joined: { room: "lobby", seq: 3, epoch: "e1", resumed: true } });
    assert.equal((await j).resumed, true);
    assert.deepEqual(FakeSocket.last.kinds(), ["hello"]);
  });

  test("an expired session starts afresh and rejoins from the positions", async () => {
    const { c, storage } = newClient();
    let ws = await connected(c);
    await joined(c, ws, "lobby", 5);
    ws.drop();
    mock.timers.tick(1000);
    await settle();
    ws = FakeSocket.last;
    ws.open();
    ws.serve({ reconnect: { code: Code.SESSION_EXPIRED, reason: "session unknown or expired" } });
    ws.drop(Code.SESSION_EXPIRED);
    assert.equal(c.state, "reconnecting");
    assert.equal(JSON.parse(storage.getItem(`corral:${URL_}`)!).session, null);
    mock.timers.tick(30_000);
    await settle();
    ws = FakeSocket.last;
    ws.open();
    assert.equal(ws.framesOf("hello")[0]!["resume"], undefined);
    ws.serve(welcome({ sessionId: "s2", resumeToken: "t2" }));
    assert.deepEqual(ws.framesOf("join"), [{ room: "lobby", sinceSeq: 5, epoch: "e1", fromPosition: true }]);
    assert.equal(c.sessionId, "s2");
  });

  test("a Welcome on a live connection carries the rotated token, which the next resume uses", async () => {
    const { c } = newClient();
    let ws = await connected(c);
    await joined(c, ws, "lobby", 3);
    // The edge resumed the session for us: only the token is new, and
    // nothing is joined again.
    ws.serve(welcome({ resumeToken: "t2", resumed: true }));
    assert.equal(c.state, "open");
    assert.equal(ws.framesOf("join").length, 1);
    ws.drop();
    mock.timers.tick(1000);
    await settle();
    ws = FakeSocket.last;
    ws.open();
    const resume = ws.framesOf("hello")[0]!["resume"] as Record<string, unknown>;
    assert.equal(resume["resumeToken"], "t2");
  });

  test("a room joined empty rejoins from seq 0 of its epoch; replayEnd ends the replay", async () => {
    const { c } = newClient();
    let ws = await connected(c);
    await joined(c, ws, "lobby", 0);
    const ends: unknown[] = [];
    c.on("replayEnd", (e) => ends.push(e));
    ws.drop(Code.SESSION_EXPIRED);
    mock.timers.tick(30_000);
    await settle();
    ws = FakeSocket.last;
    ws.open();
    ws.serve(welcome({ sessionId: "s2", resumeToken: "t2" }));
    assert.deepEqual(ws.framesOf("join"), [{ room: "lobby", epoch: "e1", fromPosition: true }]);
    ws.serve({ joined: { room: "lobby", epoch: "e1", replay: true } });
    ws.serve({ batch: { frames: [{ message: { room: "lobby", seq: 1, payload: 1 } }] } });
    ws.serve({ replayEnd: { room: "lobby", seq: 1 } });
    assert.deepEqual(ends, [{ room: "lobby", seq: 1 }]);
  });

  test("a refused resume token starts afresh", async () => {
    const storage = new MemoryStorage();
    storage.setItem(`corral:${URL_}`, JSON.stringify({ session: { sessionId: "old", resumeToken: "bad", userId: "x" }, rooms: {} }));
    const { c } = newClient({ storage });
    c.connect();
    await settle();
    FakeSocket.last.open();
    FakeSocket.last.drop(Code.RESUME_REFUSED, "resume token does not match");
    assert.equal(c.state, "reconnecting");
    mock.timers.tick(1000);
    await settle();
    FakeSocket.last.open();
    assert.equal(FakeSocket.last.framesOf("hello")[0]!["resume"], undefined);
  });

  test("a reset moves the position and is reported", async () => {
    const { c } = newClient();
    const ws = await connected(c);
    await joined(c, ws, "lobby", 2);
    const resets: unknown[] = [];
    c.on("reset", (r) => resets.push(r));
    ws.serve({ reset: { room: "lobby", seq: 900, epoch: "e2" } });
    assert.deepEqual(resets, [{ room: "lobby", seq: 900, epoch: "e2" }]);
    assert.deepEqual(c.position("lobby"), { seq: 900, epoch: "e2" });
  });

  test("a room left while offline is left again if the resumed session kept it", async () => {
    const { c } = newClient();
    let ws = await connected(c);
    await joined(c, ws, "lobby", 1);
    ws.drop();
    await c.leave("lobby");
    mock.timers.tick(1000);
    await settle();
    ws = FakeSocket.last;
    ws.open();
    assert.equal(ws.framesOf("hello")[0]!["resume"] && (ws.framesOf("hello")[0]!["resume"] as { rooms?: unknown }).rooms, undefined);
    ws.serve(welcome({ resumed: true }));
    ws.serve({ joined: { room: "lobby", seq: 1, resumed: true } });
    assert.deepEqual(ws.framesOf("leave"), [{ room: "lobby" }]);
  });
});

describe("backoff and codes", () => {
  test("honours the server's hinted delay", async () => {
    const { c } = newClient();
    const ws = await connected(c);
    const delays: (number | undefined)[] = [];
    c.on("state", (s) => delays.push(s.delayMs));
    ws.serve({ reconnect: { code: Code.GOING_AWAY, reason: "deploy", delayMs: 2000 } });
    ws.drop(Code.GOING_AWAY, "deploy");
    assert.deepEqual(delays, [2125]); // the hint plus 0.5 × 250
    mock.timers.tick(2124);
    await settle();
    assert.equal(FakeSocket.all.length, 1);
    mock.timers.tick(1);
    await settle();
    assert.equal(FakeSocket.all.length, 2);
  });

  test("backs off while connections keep failing, and resets after a stable one", async () => {
    const { c } = newClient({ random: () => 0.9999 });
    let ws = await connected(c);
    const delays: number[] = [];
    c.on("state", (s) => s.delayMs !== undefined && delays.push(s.delayMs));
    for (let i = 0; i < 4; i++) {
      ws.drop();
      mock.timers.tick(60_000);
      await settle();
      ws = FakeSocket.last;
    }
    assert.deepEqual(delays, [250, 500, 1000, 2000]);
    ws.open();
    ws.serve(welcome({ resumed: true }));
    mock.timers.tick(5000);
    ws.serve({ pong: { id: 1 } });
    ws.drop();
    assert.equal(delays.at(-1), 250, "a connection that lasted resets the backoff");
  });

  for (const code of [Code.UNAUTHENTICATED, Code.BAD_FRAME, Code.FORBIDDEN, Code.TOO_LARGE]) {
    test(`stops on ${Code[code]} (${code})`, async () => {
      const { c } = newClient();
      const ws = await connected(c);
      await joined(c, ws);
      const p = c.publish("lobby", 1);
      const errors: CorralError[] = [];
      c.on("error", (e) => errors.push(e));
      ws.drop(code, "no");
      assert.equal(c.state, "closed");
      await assert.rejects(p, (e: CorralError) => e.code === code);
      assert.equal(errors[0]?.code, code);
      mock.timers.tick(120_000);
      await settle();
      assert.equal(FakeSocket.all.length, 1, "no reconnect");
    });
  }

  test("a stop-class close explained by an error frame stops once, with the frame's message", async () => {
    const { c } = newClient();
    const ws = await connected(c);
    await joined(c, ws);
    const errors: CorralError[] = [];
    c.on("error", (e) => errors.push(e));
    ws.serve({ error: { code: Code.FORBIDDEN, message: "banned for spamming the lobby" } });
    ws.drop(Code.FORBIDDEN, "banned for spa");
    assert.equal(c.state, "closed");
    assert.equal(errors.length, 1, "one error event");
    assert.equal(errors[0]?.code, Code.FORBIDDEN);
    assert.equal(errors[0]?.message, "banned for spamming the lobby");
    mock.timers.tick(120_000);
    await settle();
    assert.equal(FakeSocket.all.length, 1, "no reconnect");
  });

  test("a session taken over elsewhere does not reconnect by itself", async () => {
    const { c } = newClient();
    const ws = await connected(c);
    ws.serve({ reconnect: { code: Code.SESSION_TAKEN_OVER, reason: "session resumed on another connection" } });
    ws.drop(Code.SESSION_TAKEN_OVER);
    assert.equal(c.state, "closed");
    mock.timers.tick(120_000);
    await settle();
    assert.equal(FakeSocket.all.length, 1);
  });

  test("close() stops for good and rejects what is pending", async () => {
    const { c, states } = newClient();
    const ws = await connected(c);
    await joined(c, ws);
    const p = c.publish("lobby", 1);
    c.close();
    c.close();
    assert.deepEqual(ws.closedByClient, { code: 1000, reason: "client closed" });
    await assert.rejects(p, CorralError);
    assert.deepEqual(states, ["connecting", "open", "closed"]);
    mock.timers.tick(120_000);
    assert.equal(FakeSocket.all.length, 1);
  });

  test("no welcome within the connect timeout counts as a failure", async () => {
    const { c } = newClient({ connectTimeoutMs: 3000 });
    c.connect();
    await settle();
    FakeSocket.last.open();
    mock.timers.tick(3000);
    assert.equal(c.state, "reconnecting");
    assert.ok(FakeSocket.all[0]!.closedByClient);
  });
});

describe("errors matched to their call by frame", () => {
  // Error.frame names the kind of frame an Error refuses: a refusal
  // settles only the call that sent that kind, in its room or with its
  // ref (docs/SDKS.md).
  test("a presence query's and a state write's refusals leave the pending join and publish of the room alone", async () => {
    const { c } = newClient();
    const ws = await connected(c);
    const errors: CorralError[] = [];
    c.on("error", (e) => errors.push(e));
    const join = c.join("lobby");
    const pub = c.publish("lobby", "hi", { id: "p1" }); // waits for the join
    const set = c.room("lobby").state.set("title", "x");
    const ref = ws.framesOf("setState").at(-1)!["ref"];
    c.queryPresence("lobby");
    ws.serve({ error: { code: Code.NOT_JOINED, message: "join the room before asking for its presence", room: "lobby", frame: "presenceQuery" } });
    ws.serve({ error: { code: Code.FORBIDDEN, message: "signals are off here", room: "lobby", frame: "signal" } });
    ws.serve({ error: { code: Code.NOT_JOINED, message: "join the room before setting state", room: "lobby", ref, frame: "setState" } });
    await assert.rejects(set, (e: unknown) => e instanceof CorralError && e.code === Code.NOT_JOINED && e.frame === "setState");
    // Neither refusal was the join's: it resolves on Joined, and the
    // publish that waited for it goes out then.
    ws.serve({ joined: { room: "lobby", seq: 3, epoch: "e1" } });
    assert.equal((await join).seq, 3);
    const f = ws.framesOf("publish").at(-1)!;
    assert.equal(f["id"], "p1");
    ws.serve({ published: { room: "lobby", id: "p1", seq: 4 } });
    assert.equal((await pub).seq, 4);
    // Refusals of no pending call are "error" events, with their frame.
    assert.deepEqual(
      errors.map((e) => [e.code, e.frame]),
      [
        [Code.NOT_JOINED, "presenceQuery"],
        [Code.FORBIDDEN, "signal"],
      ],
    );
  });

  test("an append's refusal rejects the append, not a publish of the same id", async () => {
    const { c } = newClient();
    const ws = await connected(c);
    await joined(c, ws, "chat");
    const pub = c.publish("chat", "hi", { id: "a7" });
    const app = c.room("chat").append("a7", "Hel", { version: 1 });
    ws.serve({ error: { code: Code.TOO_LARGE, message: "past growing.max-bytes", room: "chat", ref: "a7", frame: "append" } });
    await assert.rejects(app, (e: unknown) => e instanceof CorralError && e.code === Code.TOO_LARGE);
    ws.serve({ published: { room: "chat", id: "a7", seq: 1 } });
    assert.equal((await pub).seq, 1);
  });

  test("a join's own refusal rejects it; an older server's error (no frame) is matched by room", async () => {
    const { c } = newClient();
    const ws = await connected(c);
    c.on("error", () => {});
    const join = c.join("vip");
    ws.serve({ error: { code: Code.FORBIDDEN, message: "no grant", room: "vip", frame: "join" } });
    await assert.rejects(join, (e: unknown) => e instanceof CorralError && e.code === Code.FORBIDDEN && e.frame === "join");
    const old = c.join("old");
    ws.serve({ error: { code: Code.FORBIDDEN, message: "no grant", room: "old" } });
    await assert.rejects(old, (e: unknown) => e instanceof CorralError && e.code === Code.FORBIDDEN && e.frame === "");
    assert.deepEqual(c.joinedRooms, []);
  });
});

describe("signals", () => {
  test("sent at most once per interval, latest value wins", async () => {
    const { c } = newClient();
    const ws = await connected(c);
    await joined(c, ws);
    for (let x = 1; x <= 10; x++) c.signal("lobby", "cursor:alice", { x });
    assert.deepEqual(ws.framesOf("signal"), [{ room: "lobby", key: "cursor:alice", payload: { x: 1 } }]);
    mock.timers.tick(32);
    assert.equal(ws.framesOf("signal").length, 1);
    mock.timers.tick(1);
    assert.deepEqual(ws.framesOf("signal")[1], { room: "lobby", key: "cursor:alice", payload: { x: 10 } });
    mock.timers.tick(1000);
    assert.equal(ws.framesOf("signal").length, 2, "nothing new, nothing sent");
    // Keys are throttled separately.
    c.signal("lobby", "typing:alice", true);
    c.signal("lobby", "cursor:alice", { x: 11 });
    assert.equal(ws.framesOf("signal").length, 4);
  });

  test("a clear follows the throttle and is sent once", async () => {
    const { c } = newClient();
    const ws = await connected(c);
    await joined(c, ws);
    c.signal("lobby", "k", 1);
    c.clearSignal("lobby", "k");
    mock.timers.tick(33);
    assert.deepEqual(ws.framesOf("signal"), [
      { room: "lobby", key: "k", payload: 1 },
      { room: "lobby", key: "k", clear: true },
    ]);
  });

  test("signals wait for the room and are restored after a reconnect", async () => {
    const { c } = newClient();
    let ws = await connected(c);
    c.join("lobby");
    c.signal("lobby", "cursor:alice", { x: 1 });
    assert.equal(ws.framesOf("signal").length, 0);
    ws.serve({ joined: { room: "lobby", seq: 0 } });
    assert.equal(ws.framesOf("signal").length, 1);
    ws.drop();
    mock.timers.tick(1000);
    await settle();
    ws = FakeSocket.last;
    ws.open();
    ws.serve(welcome({ resumed: true }));
    ws.serve({ joined: { room: "lobby", seq: 0, resumed: true } });
    assert.deepEqual(ws.framesOf("signal"), [{ room: "lobby", key: "cursor:alice", payload: { x: 1 } }]);
  });

  test("signal events are emitted", async () => {
    const { c } = newClient();
    const ws = await connected(c);
    await joined(c, ws);
    const got: unknown[] = [];
    c.on("signal", (s) => got.push(s));
    ws.serve({ batch: { frames: [{ batch: { frames: [{ signal: { room: "lobby", key: "cursor:bob", sender: "bob", payload: { x: 0.1 } } }] } }] } });
    assert.deepEqual(got, [{ room: "lobby", key: "cursor:bob", sender: "bob", payload: { x: 0.1 }, clear: false }]);
  });
});

describe("a step of the wall clock", () => {
  // Intervals follow a monotonic clock of their own here, apart from the
  // mocked Date, which the tests step (the mocked epoch starts at 1,000 s).
  let mono = 0;
  const tick = (ms: number) => {
    mono += ms;
    mock.timers.tick(ms);
  };
  beforeEach(() => {
    mono = 0;
    mock.restoreAll();
    mock.method(performance, "now", () => mono);
  });

  test("back by 15 minutes does not hold a throttled signal for 15 minutes", async () => {
    const { c } = newClient();
    const ws = await connected(c);
    await joined(c, ws);
    c.signal("lobby", "cursor:alice", { x: 1 });
    mock.timers.setTime(Date.now() - 900_000);
    c.signal("lobby", "cursor:alice", { x: 2 });
    tick(33);
    assert.deepEqual(ws.framesOf("signal")[1], { room: "lobby", key: "cursor:alice", payload: { x: 2 } });
  });

  test("forward by an hour does not end a live connection", async () => {
    const { c } = newClient();
    const ws = await connected(c, { heartbeatMs: 1000 });
    mock.timers.setTime(Date.now() + 3_600_000);
    tick(500);
    assert.equal(c.state, "open");
    assert.deepEqual(ws.framesOf("ping"), [{ id: 1 }]);
  });
});

describe("heartbeat and acks", () => {
  test("pings when idle and reconnects when the server goes silent", async () => {
    const { c } = newClient();
    const ws = await connected(c, { heartbeatMs: 1000 });
    mock.timers.tick(500);
    assert.deepEqual(ws.framesOf("ping"), [{ id: 1 }]);
    ws.serve({ pong: { id: 1 } });
    mock.timers.tick(250);
    assert.equal(ws.framesOf("ping").length, 1, "not again so soon");
    mock.timers.tick(2000);
    assert.equal(c.state, "reconnecting");
  });

  test("acknowledges positions a while after messages", async () => {
    const { c } = newClient();
    const ws = await connected(c);
    await joined(c, ws, "lobby", 1);
    ws.serve({ message: { room: "lobby", seq: 2 } });
    ws.serve({ message: { room: "lobby", seq: 3 } });
    assert.equal(ws.framesOf("ack").length, 0);
    mock.timers.tick(1000);
    assert.deepEqual(ws.framesOf("ack"), [{ room: "lobby", seq: 3 }]);
  });
});

describe("rooms", () => {
  test("join resolves at once when already in the room; leave resolves on Left", async () => {
    const { c } = newClient();
    const ws = await connected(c);
    await joined(c, ws, "lobby", 4);
    assert.equal((await c.join("lobby")).seq, 4);
    assert.equal(ws.framesOf("join").length, 1);
    const left = c.leave("lobby");
    assert.deepEqual(ws.framesOf("leave"), [{ room: "lobby" }]);
    ws.serve({ left: { room: "lobby" } });
    await left;
    assert.deepEqual(c.joinedRooms, []);
  });

  test("a refused leave settles: a retry code sends it again, any other rejects", async () => {
    const { c } = newClient();
    const ws = await connected(c);
    await joined(c, ws, "lobby", 4);
    await joined(c, ws, "vip", 2);
    const left = c.leave("lobby");
    ws.serve({ error: { code: Code.RATE_LIMITED, message: "slow down", room: "lobby", frame: "leave", retryAfterMs: 700 } });
    assert.equal(ws.framesOf("leave").length, 1);
    mock.timers.tick(700);
    assert.deepEqual(ws.framesOf("leave"), [{ room: "lobby" }, { room: "lobby" }]);
    ws.serve({ left: { room: "lobby" } });
    await left;
    const refused = c.leave("vip");
    ws.serve({ error: { code: Code.INVALID_ARGUMENT, message: "no", room: "vip", frame: "leave" } });
    await assert.rejects(refused, (e: CorralError) => e.code === Code.INVALID_ARGUMENT && e.room === "vip");
    assert.deepEqual(c.joinedRooms, []);
  });

  test("a refused join rejects", async () => {
    const { c } = newClient();
    const ws = await connected(c);
    const p = c.join("secret");
    ws.serve({ error: { code: Code.FORBIDDEN, message: "the token does not grant joining this room", room: "secret" } });
    await assert.rejects(p, (e: CorralError) => e.code === Code.FORBIDDEN && e.room === "secret");
    assert.deepEqual(c.joinedRooms, []);
  });

  test("messages arrive in order, once", async () => {
    const { c } = newClient();
    const ws = await connected(c);
    await joined(c, ws, "lobby", 0);
    const got: number[] = [];
    c.on("message", (m) => got.push(m.seq));
    ws.serve({ batch: { frames: [1, 2, 2, 3, 1].map((seq) => ({ message: { room: "lobby", seq } })) } });
    ws.serve({ message: { room: "elsewhere", seq: 9 } });
    assert.deepEqual(got, [1, 2, 3]);
  });
});

describe("presence", () => {
  test("joins with presence and state, sets it, emits presence frames, resumes with the flag", async () => {
    const { c } = newClient();
    const ws = await connected(c);
    const got: unknown[] = [];
    c.on("presence", (p) => got.push(p));
    const p = c.join("lobby", { presence: true, state: { name: "Alice" } });
    ws.serve({ joined: { room: "lobby", seq: 3, epoch: "e1" } });
    await p;
    assert.deepEqual(ws.sent.at(-1), { join: { room: "lobby", presence: true, presenceState: { name: "Alice" } } });
    ws.serve({ presence: { room: "lobby", snapshot: true, joins: [{ userId: "alice", state: { name: "Alice" }, connections: 1 }], members: 1, connections: 1 } });
    assert.deepEqual(got, [{
      room: "lobby", snapshot: true, joins: [{ userId: "alice", state: { name: "Alice" }, connections: 1, info: undefined }],
      updates: [], leaves: [], members: 1, connections: 1, countsOnly: false,
    }]);
    c.setPresence("lobby", "away");
    assert.deepEqual(ws.sent.at(-1), { setPresence: { room: "lobby", state: "away" } });
    assert.throws(() => c.setPresence("elsewhere", 1), CorralError);
    ws.drop();
    await settle();
    mock.timers.tick(1000);
    await settle();
    const again = FakeSocket.last;
    again.open();
    const hello = again.sent[0] as { hello: { resume: { rooms: unknown[] } } };
    assert.deepEqual(hello.hello.resume.rooms, [{ room: "lobby", seq: 3, epoch: "e1", presence: true }]);
  });
});

describe("token refresh", () => {
  // mock.timers starts the clock at 1_000_000 ms: unix second 1000. The
  // fake server sends no pongs: a long heartbeat keeps the connection.
  test("getToken refreshes before the expiry, on the same connection", async () => {
    let n = 0;
    const { c, states } = newClient({ token: undefined, getToken: async () => `tok${++n}` });
    const refreshed: number[] = [];
    c.on("refreshed", (r) => refreshed.push(r.expiresUnix));
    const ws = await connected(c, { expiresUnix: 1100, heartbeatMs: 600_000 });
    assert.equal(ws.framesOf("hello")[0]!["token"], "tok1");
    mock.timers.tick(74_000);
    await settle();
    assert.deepEqual(ws.framesOf("refresh"), [], "not before three quarters of the lifetime");
    mock.timers.tick(1_000);
    await settle();
    assert.deepEqual(ws.framesOf("refresh"), [{ token: "tok2" }]);
    ws.serve({ refreshed: { expiresUnix: 1200 } });
    assert.deepEqual(refreshed, [1200]);
    // The next refresh follows the new expiry: 125 s left at 1075 s, so
    // 93.75 s later.
    mock.timers.tick(93_000);
    await settle();
    assert.equal(ws.framesOf("refresh").length, 1);
    mock.timers.tick(1_000);
    await settle();
    assert.deepEqual(ws.framesOf("refresh"), [{ token: "tok2" }, { token: "tok3" }]);
    assert.equal(FakeSocket.all.length, 1, "no reconnect");
    assert.deepEqual(states, ["connecting", "open"]);
  });

  test("a refused refresh is retried halfway to the expiry", async () => {
    let n = 0;
    const { c } = newClient({ getToken: () => `tok${++n}` });
    const errors: number[] = [];
    c.on("error", (e) => errors.push(e.code));
    const ws = await connected(c, { expiresUnix: 1100, heartbeatMs: 600_000 });
    mock.timers.tick(75_000);
    await settle();
    assert.equal(ws.framesOf("refresh").length, 1);
    ws.serve({ error: { code: Code.UNAUTHENTICATED, message: "refresh: token expired" } });
    assert.deepEqual(errors, [Code.UNAUTHENTICATED]);
    assert.equal(c.state, "open", "a refused refresh keeps the connection");
    mock.timers.tick(12_500);
    await settle();
    assert.equal(ws.framesOf("refresh").length, 2);
  });

  test("no provider: no refresh; closed at the expiry it reconnects", async () => {
    const { c, states } = newClient({ token: "alice" });
    const ws = await connected(c, { expiresUnix: 1100, heartbeatMs: 600_000 });
    mock.timers.tick(99_000);
    await settle();
    assert.deepEqual(ws.framesOf("refresh"), []);
    ws.serve({ reconnect: { code: Code.TOKEN_EXPIRED, reason: "the token expired" } });
    ws.drop(Code.TOKEN_EXPIRED, "the token expired");
    assert.equal(c.state, "reconnecting", "4104 is a retry code, not a stop");
    assert.deepEqual(states, ["connecting", "open", "reconnecting"]);
  });

  test("a new connection gets a new token from getToken", async () => {
    let n = 0;
    const { c } = newClient({ getToken: async () => `tok${++n}` });
    const ws = await connected(c, { expiresUnix: 1100, heartbeatMs: 600_000 });
    ws.drop(Code.TOKEN_EXPIRED, "the token expired");
    mock.timers.tick(2000);
    await settle();
    FakeSocket.last.open();
    assert.notEqual(FakeSocket.last, ws);
    assert.equal(FakeSocket.last.framesOf("hello")[0]!["token"], "tok2");
  });
});

describe("call", () => {
  test("resolves with the backend's payload, rejects with its code, and on a lost connection", async () => {
    const { c } = newClient({});
    const ws = await connected(c, { heartbeatMs: 600_000 });
    const ok = c.call("profile.get", { user: "ann" });
    const refused = c.call("nope");
    assert.deepEqual(ws.framesOf("call"), [
      { id: 1, method: "profile.get", payload: { user: "ann" } },
      { id: 2, method: "nope" },
    ]);
    // Answered out of order.
    ws.serve({ callResult: { id: 2, error: { code: Code.UNAVAILABLE, message: "retry later", retryAfterMs: 1000 } } });
    ws.serve({ callResult: { id: 1, payload: { name: "Ann" } } });
    assert.deepEqual(await ok, { name: "Ann" });
    await assert.rejects(refused, (e: CorralError) => e.code === Code.UNAVAILABLE && e.retryAfterMs === 1000);
    const lost = c.call("slow");
    ws.drop(4000);
    await assert.rejects(lost, (e: CorralError) => e.code === Code.UNAVAILABLE);
  });
});
