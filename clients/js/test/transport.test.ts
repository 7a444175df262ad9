import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, mock, test } from "node:test";
import { Client, Code, type ClientOptions, type TransportChange } from "../src/index.js";
import { RecordReader } from "../src/stream.js";
import { newStreamId } from "../src/poster.js";
import { httpBase } from "../src/transport.js";
import {
  FakeEventSource,
  FakeFetch,
  FakeSocket,
  MemoryStorage,
  StreamBody,
  records,
  settle,
} from "./fakes.js";

const URL_ = "ws://corral.test/ws";
const welcome = (over: Record<string, unknown> = {}) => ({
  welcome: { sessionId: "s1", resumeToken: "t1", userId: "alice", heartbeatMs: 25_000, sessionTtlMs: 60_000, ...over },
});

beforeEach(() => {
  FakeSocket.all = [];
  FakeEventSource.all = [];
  mock.timers.enable({ apis: ["setTimeout", "setInterval", "Date"], now: 1_000_000 });
  mock.method(performance, "now", () => Date.now());
});
afterEach(() => {
  mock.timers.reset();
  mock.restoreAll();
});

function newClient(opts: Partial<ClientOptions> = {}) {
  const net = new FakeFetch();
  const storage = new MemoryStorage();
  const transportStorage = (opts.transportStorage as MemoryStorage | undefined) ?? new MemoryStorage();
  const c = new Client({
    url: URL_,
    token: "alice",
    WebSocket: FakeSocket,
    EventSource: FakeEventSource,
    fetch: net.fetch,
    storage,
    transportStorage,
    random: () => 0.5,
    ...opts,
  });
  const changes: TransportChange[] = [];
  c.on("transport", (t) => changes.push(t));
  return { c, net, storage, transportStorage, changes };
}

const noContent = () => new Response(null, { status: 204 });

/** sseOpen answers the current event source and its hello POST with a welcome. */
async function sseOpen(net: FakeFetch, over: Record<string, unknown> = {}) {
  await settle();
  const es = FakeEventSource.last;
  es.open();
  await settle();
  const hello = net.to("/rt/send").at(-1)!;
  hello.respond(noContent());
  es.serve(welcome(over));
  await settle();
  return { es, hello };
}

describe("fallback", () => {
  test("a refused WebSocket falls back to SSE at once; the choice is remembered", async () => {
    const { c, net, transportStorage, changes } = newClient();
    c.connect();
    await settle();
    assert.equal(c.transport, "websocket");
    FakeSocket.last.drop(1006); // the proxy answered the upgrade 403
    await settle();
    assert.equal(FakeEventSource.all.length, 1, "SSE tried without a backoff");
    assert.equal(c.transport, "sse");
    const es = FakeEventSource.last;
    assert.match(es.url, /^http:\/\/corral\.test\/rt\/sse\?stream=[A-Za-z0-9_-]{22}$/);
    es.open();
    await settle();
    const post = net.to("/rt/send")[0]!;
    assert.equal(post.url, `http://corral.test/rt/send?stream=${es.stream}`);
    assert.equal(post.init.method, "POST");
    assert.equal(post.header("X-Corral-Stream"), es.stream);
    assert.equal(post.header("X-Corral-Secret"), "sekrit");
    assert.equal(post.header("Content-Type"), "application/json");
    assert.deepEqual(post.frames, [{ hello: { token: "alice", client: "corral-js/0.1.0" } }]);
    post.respond(noContent());
    es.serve(welcome());
    assert.equal(c.state, "open");
    assert.equal(c.transport, "sse");
    assert.deepEqual(changes, [{ transport: "sse", previous: "", failed: [{ transport: "websocket", code: 1006, reason: "" }] }]);
    const saved = JSON.parse(transportStorage.getItem(`corral:${URL_}:transport`)!);
    assert.deepEqual(saved, { transport: "sse", until: 1_000_000 + 86_400_000 });
  });

  test("a WebSocket that stalls gives way to SSE after transportTimeoutMs", async () => {
    const { c, net } = newClient({ transportTimeoutMs: 2000 });
    c.connect();
    await settle();
    FakeSocket.last.open(); // upgraded, but nothing comes back
    mock.timers.tick(1999);
    assert.equal(FakeEventSource.all.length, 0);
    mock.timers.tick(1);
    await settle();
    assert.ok(FakeSocket.last.closedByClient);
    assert.equal(FakeEventSource.all.length, 1);
    await sseOpen(net);
    assert.equal(c.transport, "sse");
  });

  test("SSE failing too falls back to HTTP streaming; a full failed round backs off", async () => {
    const { c, net, changes } = newClient();
    c.connect();
    await settle();
    FakeSocket.last.drop(1006);
    await settle();
    FakeEventSource.last.fail(); // a proxy that answers the GET 502
    await settle();
    assert.equal(FakeEventSource.last.closed, true, "closed before the browser retries");
    const open = net.to("/rt/stream");
    assert.equal(open.length, 1, "streaming tried at once");
    assert.equal(c.state, "connecting", "no state change within a round");
    open[0]!.reject(new TypeError("network"));
    await settle();
    assert.equal(c.state, "reconnecting", "the round failed: backoff");
    assert.equal(FakeSocket.all.length, 1);
    // Round two, after the backoff: the preferred order again.
    mock.timers.tick(60_000);
    await settle();
    assert.equal(FakeSocket.all.length, 2);
    assert.deepEqual(changes, []);
  });

  test("a remembered transport is tried first until it expires", async () => {
    const transportStorage = new MemoryStorage();
    transportStorage.setItem(`corral:${URL_}:transport`, JSON.stringify({ transport: "sse", until: 1_000_000 + 1000 }));
    const a = newClient({ transportStorage });
    a.c.connect();
    await settle();
    assert.equal(FakeSocket.all.length, 0);
    assert.equal(FakeEventSource.all.length, 1);
    a.c.close();
    mock.timers.tick(1000);
    const b = newClient({ transportStorage });
    b.c.connect();
    await settle();
    assert.equal(FakeSocket.all.length, 1, "expired: the WebSocket first again");
  });

  test("rememberTransportMs 0 keeps the choice for this page only; a stored choice not allowed is ignored", async () => {
    const transportStorage = new MemoryStorage();
    const { c, net } = newClient({ transportStorage, rememberTransportMs: 0 });
    c.connect();
    await settle();
    FakeSocket.last.drop(1006);
    await sseOpen(net);
    assert.equal(transportStorage.map.size, 0);
    transportStorage.setItem(`corral:${URL_}:transport`, JSON.stringify({ transport: "sse", until: 2_000_000 }));
    const b = newClient({ transportStorage, transports: ["websocket", "stream"] });
    b.c.connect();
    await settle();
    assert.equal(b.c.transport, "websocket");
  });

  test("an event stream that opens but stalls (a buffering proxy) gives way to streaming", async () => {
    const { c, net } = newClient({ transports: ["sse", "stream"], transportTimeoutMs: 2000 });
    c.connect();
    await settle();
    FakeEventSource.last.open();
    await settle();
    net.to("/rt/send")[0]!.respond(noContent()); // the hello went, the welcome never comes
    mock.timers.tick(2000);
    await settle();
    assert.equal(FakeEventSource.last.closed, true);
    assert.equal(net.to("/rt/stream").length, 1);
    assert.equal(c.transport, "stream");
  });

  test("transports forces one, or leaves one out", async () => {
    const { c } = newClient({ transports: ["sse"] });
    c.connect();
    await settle();
    assert.equal(FakeSocket.all.length, 0);
    FakeEventSource.last.fail();
    await settle();
    assert.equal(c.state, "reconnecting", "nothing to fall back to: backoff");
    mock.timers.tick(60_000);
    await settle();
    assert.equal(FakeEventSource.all.length, 2);
    assert.equal(FakeSocket.all.length, 0);
    assert.throws(() => new Client({ url: URL_, transports: ["sse"], WebSocket: FakeSocket, fetch: undefined, EventSource: undefined }), /none of the transports/);
  });

  test("a server's refusal before Welcome is no reason to fall back", async () => {
    const { c } = newClient();
    c.connect();
    await settle();
    const ws = FakeSocket.last;
    ws.open();
    ws.serve({ error: { code: Code.UNAUTHENTICATED, message: "bad token" } });
    ws.drop(Code.UNAUTHENTICATED, "bad token");
    assert.equal(c.state, "closed");
    assert.equal(FakeEventSource.all.length, 0);
  });

  test("the transport stays after it worked: a drop reconnects on it first", async () => {
    const { c, net } = newClient();
    c.connect();
    await settle();
    FakeSocket.last.drop(1006);
    await sseOpen(net);
    FakeEventSource.last.fail();
    await settle();
    assert.equal(c.state, "reconnecting");
    mock.timers.tick(60_000);
    await settle();
    assert.equal(FakeSocket.all.length, 1, "no new WebSocket attempt");
    assert.equal(FakeEventSource.all.length, 2);
  });
});

describe("resume across transports", () => {
  test("a session started on WebSocket resumes over SSE from its positions", async () => {
    const { c, net, changes } = newClient();
    c.connect();
    await settle();
    const ws = FakeSocket.last;
    ws.open();
    ws.serve(welcome());
    const j = c.join("lobby");
    ws.serve({ joined: { room: "lobby", seq: 3, epoch: "e1" } });
    await j;
    ws.serve({ message: { room: "lobby", seq: 4, id: "x", sender: "bob", payload: "hi" } });
    const p = c.publish("lobby", "mine");
    const pubId = ws.framesOf("publish")[0]!["id"];
    ws.drop(1006); // the network moves behind a proxy that strips Upgrade
    mock.timers.tick(60_000);
    await settle();
    FakeSocket.last.drop(1006);
    await settle();
    const es = FakeEventSource.last;
    es.open();
    await settle();
    const hello = net.to("/rt/send")[0]!;
    assert.deepEqual(hello.frames[0], {
      hello: {
        token: "alice",
        client: "corral-js/0.1.0",
        resume: { sessionId: "s1", resumeToken: "t1", instance: hello.frames[0]!["hello"]!["resume"]["instance"], attempt: 1, rooms: [{ room: "lobby", seq: 4, epoch: "e1" }] },
      },
    });
    hello.respond(noContent());
    es.serve({ batch: { frames: [welcome({ resumed: true, resumeToken: "t2" }), { joined: { room: "lobby", seq: 4, epoch: "e1", resumed: true } }] } });
    await settle();
    // The unacknowledged publish goes again, same id, by POST.
    const again = net.to("/rt/send")[1]!;
    assert.deepEqual(again.frames, [{ publish: { room: "lobby", id: pubId, payload: "mine", seq: 1 } }]);
    again.respond(noContent());
    es.serve({ published: { room: "lobby", id: pubId, seq: 5 } });
    assert.equal((await p).seq, 5);
    assert.deepEqual(changes.map((t) => `${t.previous}->${t.transport}`), ["->websocket", "websocket->sse"]);
  });

  test("SSE: corral-close with a resume code resumes on a new stream", async () => {
    const { c, net } = newClient({ transports: ["sse"] });
    c.connect();
    const { es } = await sseOpen(net);
    es.serve({ reconnect: { code: Code.SLOW_CONSUMER, reason: "send queue overflow" } });
    es.event("corral-close", JSON.stringify({ code: Code.SLOW_CONSUMER, reason: "send queue overflow" }));
    assert.equal(es.closed, true);
    assert.equal(c.state, "reconnecting");
    mock.timers.tick(60_000);
    await settle();
    const es2 = FakeEventSource.last;
    assert.notEqual(es2.stream, es.stream, "a new stream id");
    es2.open();
    await settle();
    assert.equal(net.to("/rt/send").at(-1)!.frames[0]!["hello"]!["resume"]["sessionId"], "s1");
  });

  test("SSE: a stop code in corral-close stops", async () => {
    const { c, net } = newClient({ transports: ["sse"] });
    c.connect();
    const { es } = await sseOpen(net);
    es.serve({ error: { code: Code.FORBIDDEN, message: "banned" } });
    es.event("corral-close", JSON.stringify({ code: Code.FORBIDDEN, reason: "banned" }));
    assert.equal(c.state, "closed");
  });
});

describe("POST /rt/send", () => {
  test("one POST at a time, in order; what was queued meanwhile goes in the next", async () => {
    const { c, net } = newClient({ transports: ["sse"] });
    c.connect();
    const { es } = await sseOpen(net);
    const j = c.join("a");
    c.join("b");
    c.join("c");
    await settle();
    const sends = net.to("/rt/send");
    assert.equal(sends.length, 2, "hello, then the first join; the others wait");
    assert.deepEqual(sends[1]!.frames.map((f) => f["join"]!["room"]), ["a"]);
    sends[1]!.respond(noContent());
    await settle();
    assert.equal(net.to("/rt/send").length, 3);
    assert.deepEqual(net.to("/rt/send")[2]!.frames.map((f) => f["join"]!["room"]), ["b", "c"]);
    es.serve({ joined: { room: "a", seq: 0, epoch: "e" } });
    await j;
  });

  test("close() leaves: DELETE /rt/send after the POST on its way, then the event stream is dropped", async () => {
    const { c, net } = newClient({ transports: ["sse"] });
    c.connect();
    const { es } = await sseOpen(net);
    c.ping();
    await settle();
    const ping = net.to("/rt/send").at(-1)!;
    c.close();
    await settle();
    assert.equal(net.requests.filter((r) => r.init.method === "DELETE").length, 0, "waits for the POST");
    assert.equal(es.closed, false);
    ping.respond(noContent());
    await settle();
    const del = net.requests.filter((r) => r.init.method === "DELETE");
    assert.equal(del.length, 1);
    assert.equal(del[0]!.url, `http://corral.test/rt/send?stream=${es.stream}`);
    assert.equal(del[0]!.header("X-Corral-Secret"), "sekrit");
    assert.equal(del[0]!.init.keepalive, true);
    assert.equal(es.closed, false, "dropped after the edge heard");
    del[0]!.respond(noContent());
    await settle();
    assert.equal(es.closed, true);
    assert.equal(c.state, "closed");
  });

  test("close() over HTTP streaming leaves too; a lost stream does not", async () => {
    const { c, net } = newClient({ transports: ["stream"] });
    c.connect();
    await settle();
    const open = net.to("/rt/stream")[0]!;
    let body = new StreamBody();
    open.respond(new Response(body.body, { status: 200, headers: { "X-Corral-Secret": "x" } }));
    body.record(welcome());
    await settle();
    body.error(); // lost: no DELETE
    await settle();
    assert.equal(net.requests.filter((r) => r.init.method === "DELETE").length, 0);
    mock.timers.tick(60_000);
    await settle();
    body = new StreamBody();
    net.to("/rt/stream")[1]!.respond(new Response(body.body, { status: 200, headers: { "X-Corral-Secret": "y" } }));
    body.record(welcome({ resumed: true }));
    await settle();
    assert.equal(c.state, "open");
    c.close();
    await settle();
    const del = net.requests.filter((r) => r.init.method === "DELETE");
    assert.equal(del.length, 1);
    assert.equal(del[0]!.header("X-Corral-Secret"), "y");
  });

  test("a POST the edge no longer knows (404) resumes on a new stream", async () => {
    const { c, net } = newClient({ transports: ["sse"] });
    c.connect();
    const { es } = await sseOpen(net);
    c.ping();
    await settle();
    net.to("/rt/send").at(-1)!.respond(new Response("{}", { status: 404 }));
    await settle();
    assert.equal(es.closed, true);
    assert.equal(c.state, "reconnecting");
  });

  test("a refused body (400) stops", async () => {
    const { c, net } = newClient({ transports: ["sse"] });
    c.connect();
    await sseOpen(net);
    c.ping();
    await settle();
    net.to("/rt/send").at(-1)!.respond(new Response("{}", { status: 400 }));
    await settle();
    assert.equal(c.state, "closed");
  });
});

describe("HTTP streaming", () => {
  test("the hello opens the stream; records carry frames; the rest goes by POST", async () => {
    const { c, net, changes } = newClient({ transports: ["stream"] });
    c.connect();
    await settle();
    const open = net.to("/rt/stream")[0]!;
    const id = new URL(open.url).searchParams.get("stream")!;
    assert.match(id, /^[A-Za-z0-9_-]{22}$/);
    assert.equal(open.header("X-Corral-Stream"), id);
    assert.equal(open.header("Content-Type"), "application/json");
    assert.deepEqual(open.frames, [{ hello: { token: "alice", client: "corral-js/0.1.0" } }]);
    const body = new StreamBody();
    open.respond(new Response(body.body, { status: 200, headers: { "X-Corral-Stream": id, "X-Corral-Secret": "s3" } }));
    // A record split across chunks, and a heartbeat.
    const bytes = records(welcome(), "", { joined: { room: "r", seq: 0, epoch: "e" } });
    body.raw(bytes.subarray(0, 7));
    body.raw(bytes.subarray(7));
    await settle();
    assert.equal(c.state, "open");
    assert.equal(c.transport, "stream");
    assert.deepEqual(changes[0], { transport: "stream", previous: "", failed: [] });
    c.ping();
    await settle();
    const send = net.to("/rt/send")[0]!;
    assert.equal(send.header("X-Corral-Secret"), "s3");
    assert.deepEqual(send.frames, [{ ping: { id: 1 } }]);
  });

  test("a body that ends after a reconnect hint resumes; without one it is the carrier failing", async () => {
    const { c, net } = newClient({ transports: ["stream"] });
    const states: { state: string; code?: number }[] = [];
    c.on("state", (s) => states.push({ state: s.state, code: s.code }));
    c.connect();
    await settle();
    let body = new StreamBody();
    net.to("/rt/stream")[0]!.respond(new Response(body.body, { status: 200, headers: { "X-Corral-Secret": "x" } }));
    body.record(welcome(), { reconnect: { code: Code.GOING_AWAY, reason: "deploy", delayMs: 10 } });
    body.end();
    await settle();
    assert.deepEqual(states.at(-1), { state: "reconnecting", code: Code.GOING_AWAY });
    mock.timers.tick(60_000);
    await settle();
    const again = net.to("/rt/stream")[1]!;
    assert.equal(again.frames[0]!["hello"]!["resume"]["sessionId"], "s1");
    body = new StreamBody();
    again.respond(new Response(body.body, { status: 200, headers: { "X-Corral-Secret": "y" } }));
    body.record(welcome({ resumed: true }));
    await settle();
    assert.equal(c.state, "open");
    body.error();
    await settle();
    assert.deepEqual(states.at(-1), { state: "reconnecting", code: 1006 });
  });

  test("a refusal by admission control (503 with a code) backs off without falling back", async () => {
    const { c, net } = newClient({ transports: ["stream", "sse"] });
    const states: { state: string; code?: number }[] = [];
    c.on("state", (s) => states.push({ state: s.state, code: s.code }));
    c.connect();
    await settle();
    net.to("/rt/stream")[0]!.respond(new Response(JSON.stringify({ code: Code.OVERLOADED, message: "busy" }), { status: 503 }));
    await settle();
    assert.deepEqual(states.at(-1), { state: "reconnecting", code: Code.OVERLOADED });
    assert.equal(FakeEventSource.all.length, 0);
  });
});

describe("parts", () => {
  test("RecordReader splits records however the bytes arrive", () => {
    const bytes = records("a", "", "bcd", "x".repeat(300));
    for (let cut = 0; cut <= bytes.length; cut++) {
      const r = new RecordReader();
      const got = [...r.push(bytes.subarray(0, cut)), ...r.push(bytes.subarray(cut))].map((b) => new TextDecoder().decode(b));
      assert.deepEqual(got, ["a", "", "bcd", "x".repeat(300)], `cut at ${cut}`);
      assert.equal(r.pending(), false);
    }
  });

  test("RecordReader takes any bytes in any chunks without throwing, up to its limit", () => {
    let x = 0x9e3779b9;
    const rand = () => ((x = (x * 1103515245 + 12345) >>> 0) >>> 8) / 2 ** 24;
    for (let run = 0; run < 300; run++) {
      const r = new RecordReader(1000);
      let total = 0;
      try {
        for (let i = 0; i < 20; i++) {
          const chunk = new Uint8Array(Math.floor(rand() * 40));
          for (let j = 0; j < chunk.length; j++) chunk[j] = rand() < 0.7 ? 0 : Math.floor(rand() * 256);
          for (const rec of r.push(chunk)) total += rec.length;
        }
      } catch (e) {
        assert.match((e as Error).message, /^stream: a record of \d+ bytes \(at most 1000\)$/);
      }
      assert.ok(total <= 20 * 40);
    }
  });

  test("a record past the limit ends the stream as the carrier failing", async () => {
    const { c, net } = newClient({ transports: ["stream"] });
    const states: { state: string; code?: number; reason?: string }[] = [];
    c.on("state", (s) => states.push({ state: s.state, code: s.code, reason: s.reason }));
    c.connect();
    await settle();
    const body = new StreamBody();
    net.to("/rt/stream")[0]!.respond(new Response(body.body, { status: 200, headers: { "X-Corral-Secret": "x" } }));
    body.raw(new Uint8Array([0xff, 0xff, 0xff, 0xff, 1, 2, 3]));
    await settle();
    assert.deepEqual(states.at(-1), { state: "reconnecting", code: 1006, reason: "stream: a record of 4294967295 bytes (at most 16777216)" });
  });

  test("stream ids are 22 characters of base64url, fresh each time", () => {
    const a = newStreamId(Math.random);
    assert.match(a, /^[A-Za-z0-9_-]{22}$/);
    assert.notEqual(newStreamId(Math.random), a);
  });

  test("httpBase", () => {
    assert.equal(httpBase("ws://h:8080/ws"), "http://h:8080");
    assert.equal(httpBase("wss://h/corral/ws"), "https://h/corral");
    assert.equal(httpBase("wss://h/ws?x=1"), "https://h");
  });
});
