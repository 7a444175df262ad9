import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { afterEach, beforeEach, describe, mock, test } from "node:test";
import { Client, Code, CorralError, type GrowingChunk, type KeyChange } from "../src/index.js";
import { FakeSocket, MemoryStorage, settle } from "./fakes.js";

// Growing messages and keyed room state through a Client, on frames a
// test serves by hand (the server answers these frames 4410 until the
// core delivers them, docs/MESSAGES.md and docs/STATE.md).

interface Case {
  name: string;
  source: string;
  target: string;
  delta: string;
}
const deltas = JSON.parse(readFileSync(new URL("../../test/golden/deltas.json", import.meta.url), "utf8")) as Case[];
const b64 = (s: string) => Buffer.from(s, "utf8").toString("base64");

beforeEach(() => {
  FakeSocket.all = [];
  mock.timers.enable({ apis: ["setTimeout", "setInterval", "Date"], now: 1_000_000 });
  mock.method(performance, "now", () => Date.now());
});
afterEach(() => {
  mock.timers.reset();
  mock.restoreAll();
});

async function joinedClient(room: string, seq = 0): Promise<{ c: Client; ws: FakeSocket }> {
  const c = new Client({ url: "ws://corral.test/ws", token: "alice", WebSocket: FakeSocket, storage: new MemoryStorage(), random: () => 0.5, transports: ["websocket"] });
  c.on("error", () => {});
  c.connect();
  await settle();
  const ws = FakeSocket.last;
  ws.open();
  ws.serve({ welcome: { sessionId: "s1", resumeToken: "t1", userId: "alice", heartbeatMs: 25_000, sessionTtlMs: 60_000 } });
  const p = c.join(room);
  ws.serve({ joined: { room, seq, epoch: "e1" } });
  await p;
  return { c, ws };
}

/** A chunk of the growing message "a7" of room "chat", opened at seq 17. */
const chunk = (seq: number, version: number, data: string, more: Record<string, unknown> = {}) => ({
  message: { room: "chat", seq, id: "a7", chunk: { messageSeq: 17, version, dataBase64: b64(data), ...more } },
});

describe("growing messages", () => {
  test("live chunks assemble the text, with chunk and final events", async () => {
    const { c, ws } = await joinedClient("chat", 16);
    const room = c.room("chat");
    const seen: GrowingChunk[] = [];
    let finals = 0;
    room.on("growing", (g) => {
      g.on("chunk", (ch) => seen.push(ch));
      g.on("final", () => finals++);
    });
    ws.serve(chunk(17, 1, "Hel"));
    assert.equal(room.message("a7")?.text, "Hel");
    ws.serve({ message: { room: "chat", seq: 18, id: "m1", payload: 1 } });
    ws.serve(chunk(19, 2, "lo"));
    ws.serve(chunk(20, 3, " wörld", { final: true }));
    const g = room.message("a7")!;
    assert.equal(g.text, "Hello wörld");
    assert.equal(g.version, 3);
    assert.equal(g.final, true);
    assert.deepEqual(seen.map((s) => [s.seq, s.version]), [[17, 1], [19, 2], [20, 3]]);
    assert.equal(finals, 1);
  });

  test("a join mid-stream: the prefix as a replace at seq S, then only chunks above S", async () => {
    const { c, ws } = await joinedClient("chat", 19);
    const room = c.room("chat");
    const versions: number[] = [];
    room.on("growing", (g) => g.on("chunk", (ch) => versions.push(ch.version)));
    ws.serve(chunk(19, 2, "Hello", { replace: true }));
    ws.serve(chunk(20, 3, "!", { final: true }));
    assert.equal(room.message("a7")?.text, "Hello!");
    assert.deepEqual(versions, [2, 3]);
  });

  test("a resume's replay, duplicates and chunks below the prefix apply once", async () => {
    const { c, ws } = await joinedClient("chat", 16);
    const room = c.room("chat");
    const versions: number[] = [];
    room.on("growing", (g) => g.on("chunk", (ch) => versions.push(ch.version)));
    ws.serve(chunk(17, 1, "Hel"));
    ws.serve(chunk(19, 2, "lo"));
    ws.serve(chunk(17, 1, "Hel")); // replayed
    ws.serve(chunk(19, 2, "lo")); // replayed
    ws.serve(chunk(20, 3, "!"));
    assert.equal(room.message("a7")?.text, "Hello!");
    assert.deepEqual(versions, [1, 2, 3]);
  });

  test("a missing version, or a chunk after the final one, is refused with a gap", async () => {
    const { c, ws } = await joinedClient("chat", 16);
    const room = c.room("chat");
    const gaps: string[] = [];
    room.on("gap", (e) => gaps.push(e.message));
    ws.serve(chunk(17, 1, "Hel"));
    ws.serve(chunk(20, 3, "!"));
    assert.equal(room.message("a7")?.text, "Hel");
    ws.serve(chunk(21, 2, "lo", { final: true }));
    ws.serve(chunk(22, 3, "?"));
    assert.equal(room.message("a7")?.text, "Hello");
    assert.equal(gaps.length, 2);
  });

  test("a replace as a delta against the previous body (Go-encoded fixture)", async () => {
    const { c, ws } = await joinedClient("chat", 16);
    const room = c.room("chat");
    let seq = 17;
    let n = 0;
    for (const d of deltas) {
      if (d.source === "" || d.target === "") continue; // no body to hold / empty replace
      ws.serve({ message: { room: "chat", seq: seq++, id: `d${n}`, chunk: { messageSeq: seq - 1, version: 1, dataBase64: d.source } } });
      ws.serve({ message: { room: "chat", seq: seq++, id: `d${n}`, chunk: { messageSeq: seq - 2, version: 2, replace: true, deltaBase64: d.delta } } });
      assert.deepEqual(Buffer.from(room.message(`d${n}`)!.body).toString("base64"), d.target, d.name);
      n++;
    }
    assert.ok(n >= 5);
  });

  test("append sends the frame and settles on published or the error", async () => {
    const { c, ws } = await joinedClient("chat");
    const room = c.room("chat");
    const first = room.append("a7", "Hel", { version: 1 });
    const f = ws.framesOf("append").at(-1)!;
    assert.deepEqual(f, { room: "chat", id: "a7", dataBase64: b64("Hel"), version: 1 });
    ws.serve({ published: { room: "chat", id: "a7", seq: 17 } });
    assert.equal((await first).seq, 17);
    const last = room.append("a7", "lo", { final: true, version: 2 });
    assert.equal(ws.framesOf("append").at(-1)!["final"], true);
    ws.serve({ error: { code: Code.UNIMPLEMENTED, message: "append: not implemented yet", room: "chat", ref: "a7" } });
    await assert.rejects(last, (e: unknown) => e instanceof CorralError && e.code === Code.UNIMPLEMENTED && e.advice === "stop");
  });

  test("appends of one id pipeline: answers settle them oldest first", async () => {
    const { c, ws } = await joinedClient("chat");
    const room = c.room("chat");
    const tokens = ["The", " quick", " fox"].map((t, i) => room.append("a8", t, { version: i + 1, final: i === 2 }));
    assert.equal(ws.framesOf("append").length, 3);
    ws.serve({ published: { room: "chat", id: "a8", seq: 30 } });
    ws.serve({ published: { room: "chat", id: "a8", seq: 31 } });
    ws.serve({ error: { code: Code.TOO_LARGE, message: "too large", room: "chat", ref: "a8" } });
    assert.equal((await tokens[0]!).seq, 30);
    assert.equal((await tokens[1]!).seq, 31);
    await assert.rejects(tokens[2]!, (e: unknown) => e instanceof CorralError && e.code === Code.TOO_LARGE);
  });
});

describe("room state", () => {
  test("a snapshot then changes; duplicates ignored; TTL expiry removes the key", async () => {
    const { c, ws } = await joinedClient("doc");
    const st = c.room("doc").state;
    const changes: KeyChange[] = [];
    st.on("change", (ch) => changes.push(ch));
    ws.serve({ stateSnapshot: { room: "doc", entries: [{ key: "title", value: "Draft", version: 1 }, { key: "b", value: { n: 1 }, version: 4 }], position: 4, epoch: "e1" } });
    assert.equal(st.get("title")?.value, "Draft");
    assert.deepEqual(st.entries().map(([k]) => k), ["b", "title"]);
    ws.serve({ stateChange: { room: "doc", key: "title", value: "Final", version: 2, position: 5, epoch: "e1" } });
    ws.serve({ stateChange: { room: "doc", key: "title", value: "Final", version: 2, position: 5, epoch: "e1" } }); // replayed
    ws.serve({ stateChange: { room: "doc", key: "cursor", value: { x: 1 }, version: 1, position: 6, epoch: "e1", expiresMs: 1_002_000 } });
    assert.equal(st.get("cursor")?.expiresMs, 1_002_000);
    ws.serve({ stateChange: { room: "doc", key: "cursor", version: 1, deleted: true, expired: true, position: 7, epoch: "e1" } });
    assert.equal(st.get("cursor"), undefined);
    assert.equal(st.get("title")?.value, "Final");
    assert.deepEqual(changes.map((ch) => [ch.key, ch.position, ch.expired]), [["title", 5, false], ["cursor", 6, false], ["cursor", 7, true]]);
    assert.equal(st.position, 7);
  });

  test("a resume sends the view's state position; a room's first change begins a view without a snapshot", async () => {
    const { c, ws } = await joinedClient("doc");
    const st = c.room("doc").state;
    ws.serve({ stateChange: { room: "doc", key: "a", value: 1, version: 1, position: 1, epoch: "e1" } });
    ws.serve({ stateChange: { room: "doc", key: "a", value: 2, version: 2, position: 2, epoch: "e1" } });
    assert.equal(st.get("a")?.value, 2);
    ws.drop(1006);
    mock.timers.tick(125);
    await settle();
    const ws2 = FakeSocket.last;
    ws2.open();
    const hello = (ws2.sent[0] as { hello: { resume: { rooms: Record<string, unknown>[] } } }).hello;
    assert.deepEqual(hello.resume.rooms, [{ room: "doc", epoch: "e1", statePosition: 2, stateEpoch: "e1" }]);
  });

  test("too old: a gap or another epoch is stale, the fresh snapshot replaces the view", async () => {
    const { c, ws } = await joinedClient("doc");
    const st = c.room("doc").state;
    const stale: string[] = [];
    st.on("stale", (e) => stale.push(e.message));
    ws.serve({ stateSnapshot: { room: "doc", entries: [{ key: "a", value: 1, version: 1 }], position: 3, epoch: "e1" } });
    ws.serve({ stateChange: { room: "doc", key: "a", value: 2, version: 2, position: 5, epoch: "e1" } });
    ws.serve({ stateChange: { room: "doc", key: "a", value: 2, version: 1, position: 1, epoch: "e2" } });
    assert.equal(stale.length, 2);
    assert.equal(st.get("a")?.value, 1);
    ws.serve({ stateSnapshot: { room: "doc", entries: [{ key: "z", value: true, version: 1 }], position: 9, epoch: "e2" } });
    assert.deepEqual(st.entries().map(([k]) => k), ["z"]);
    ws.serve({ stateChange: { room: "doc", key: "z", value: false, version: 2, position: 10, epoch: "e2" } });
    assert.equal(st.get("z")?.value, false);
    assert.equal(st.epoch, "e2");
  });

  test("a set as a delta against the previous value", async () => {
    const { c, ws } = await joinedClient("doc");
    const st = c.room("doc").state;
    const d = deltas.find((x) => x.source !== "" && x.target !== "" && x.source !== x.target)!;
    ws.serve({ stateSnapshot: { room: "doc", entries: [{ key: "k", valueBase64: d.source, version: 1 }], position: 1, epoch: "e1" } });
    ws.serve({ stateChange: { room: "doc", key: "k", version: 2, position: 2, epoch: "e1", deltaBase64: d.delta } });
    const v = st.get("k")!;
    assert.equal(v.version, 2);
    const got = v.value instanceof Uint8Array ? Buffer.from(v.value) : Buffer.from(JSON.stringify(v.value));
    assert.equal(got.toString("base64"), d.target);
  });

  test("set and delete send their frames and settle on stateUpdated or a typed error", async () => {
    const { c, ws } = await joinedClient("doc");
    const st = c.room("doc").state;
    const set = st.set("title", "Final", { cas: 1, ttlMs: 5000 });
    const sf = ws.framesOf("setState").at(-1)!;
    assert.deepEqual({ ...sf, ref: "" }, { room: "doc", key: "title", value: "Final", cas: true, version: 1, ttlMs: 5000, ref: "" });
    ws.serve({ stateUpdated: { room: "doc", key: "title", ref: sf["ref"], version: 2, position: 5 } });
    assert.equal((await set).version, 2);

    for (const code of [Code.VERSION_CONFLICT, Code.TOO_MANY_KEYS, Code.UNIMPLEMENTED]) {
      const p = st.set("k", 1, { cas: 0 });
      const f = ws.framesOf("setState").at(-1)!;
      ws.serve({ error: { code, message: "refused", room: "doc", ref: f["ref"] } });
      await assert.rejects(p, (e: unknown) => e instanceof CorralError && e.code === code);
    }
    const del = st.delete("title", { cas: 2 });
    const df = ws.framesOf("deleteState").at(-1)!;
    assert.deepEqual({ ...df, ref: "" }, { room: "doc", key: "title", cas: true, version: 2, ref: "" });
    ws.serve({ stateUpdated: { room: "doc", key: "title", ref: df["ref"], version: 2, position: 6, deleted: true } });
    assert.equal((await del).deleted, true);
    // A write unanswered when the connection drops rejects (not resent).
    const lost = st.set("x", 1);
    ws.drop();
    await assert.rejects(lost, (e: unknown) => e instanceof CorralError && e.code === Code.UNAVAILABLE);
  });
});
