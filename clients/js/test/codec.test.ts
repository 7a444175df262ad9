import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";
import { CodecError, decodeServer, encodeClient } from "../src/codec.js";
import { clientKinds, serverKinds } from "../src/gen/corral/v1/client_json.js";
import { ClientFrameSchema, ServerFrameSchema } from "../src/gen/corral/v1/client_pb.js";
import { Code } from "../src/gen/corral/v1/codes_pb.js";
import type { ClientFrameJSON } from "../src/wire.js";

// The golden frames are shared with e2e/golden_test.go, which checks them
// against the Go codec: passing both means the SDK and the server agree.
interface Golden {
  client: { name: string; wire: string }[];
  server: { name: string; wire: string; sdk: unknown[] }[];
}
const golden = JSON.parse(
  readFileSync(new URL("../../test/golden/frames.json", import.meta.url), "utf8"),
) as Golden;

const bytes = (b64: string) => Uint8Array.from(Buffer.from(b64, "base64"));

/** The SDK's input for a golden client frame: a *Base64 field becomes bytes. */
function sdkInput(wire: string): Record<string, Record<string, unknown>> {
  const f = JSON.parse(wire) as Record<string, Record<string, unknown>>;
  for (const body of Object.values(f)) {
    for (const [k, v] of Object.entries(body)) {
      // payloadBase64, dataBase64 (an append), valueBase64 (a set).
      if (k.endsWith("Base64") && typeof v === "string") {
        body[k.slice(0, -"Base64".length)] = bytes(v);
        delete body[k];
      }
    }
  }
  return f;
}

/** Reversed key order and explicit zero values must encode the same. */
function shuffled(f: Record<string, Record<string, unknown>>): ClientFrameJSON {
  const [kind, body] = Object.entries(f)[0]!;
  const zeros: Record<string, unknown> = { room: "", id: kind === "ping" ? 0 : "", epoch: "", sinceSeq: 0, seq: 0, clear: false };
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(body).reverse()) out[k] = body[k];
  for (const [k, v] of Object.entries(zeros)) if (!(k in out) && kind !== "hello") out[k] = v;
  return { [kind]: out } as ClientFrameJSON;
}

function fromSDKGolden(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(fromSDKGolden);
  if (v && typeof v === "object") {
    const o = v as Record<string, unknown>;
    if (typeof o["$base64"] === "string") return bytes(o["$base64"]);
    return Object.fromEntries(Object.entries(o).map(([k, x]) => [k, x === null ? undefined : fromSDKGolden(x)]));
  }
  return v;
}

describe("encodeClient matches the Go encoder", () => {
  for (const g of golden.client) {
    test(g.name, () => {
      assert.equal(encodeClient(sdkInput(g.wire) as ClientFrameJSON), g.wire);
      assert.equal(encodeClient(shuffled(sdkInput(g.wire))), g.wire);
    });
  }

  test("publish from the issue", () => {
    assert.equal(
      encodeClient({ publish: { room: "lobby", id: "1", payload: { text: "hi" } } }),
      '{"publish":{"room":"lobby","id":"1","payload":{"text":"hi"}}}',
    );
  });

  test("null and empty payloads are no payload", () => {
    const want = '{"publish":{"room":"r","id":"1"}}';
    assert.equal(encodeClient({ publish: { room: "r", id: "1", payload: null } }), want);
    assert.equal(encodeClient({ publish: { room: "r", id: "1", payload: new Uint8Array() } }), want);
    assert.equal(encodeClient({ publish: { room: "r", id: "1", payload: undefined } }), want);
  });

  test("refuses what the server would refuse", () => {
    assert.throws(() => encodeClient({} as ClientFrameJSON), CodecError);
    assert.throws(() => encodeClient({ join: { room: "a" }, leave: { room: "a" } } as ClientFrameJSON), CodecError);
    assert.throws(() => encodeClient({ ack: { room: "a", seq: -1 } }), CodecError);
    assert.throws(() => encodeClient({ ack: { room: "a", seq: 1.5 } }), CodecError);
    assert.throws(() => encodeClient({ join: { room: 7 as unknown as string } }), CodecError);
    assert.throws(() => encodeClient({ publish: { room: "a", payload: (() => 1) as never } }), CodecError);
  });
});

describe("decodeServer reads what the Go encoder writes", () => {
  for (const g of golden.server) {
    test(g.name, () => {
      assert.deepEqual(decodeServer(g.wire), fromSDKGolden(g.sdk));
    });
  }

  test("message from the issue", () => {
    assert.deepEqual(decodeServer('{"message":{"room":"r","seq":3,"sender":"a","payload":{"x":1},"timeMs":1,"id":"c"}}'), [
      { case: "message", value: { room: "r", seq: 3, sender: "a", payload: { x: 1 }, timeMs: 1, id: "c", senderInfo: undefined, chunk: undefined } },
    ]);
  });

  test("a batch is flattened in order and unknown kinds are skipped", () => {
    const frames = decodeServer(
      '{"batch":{"frames":[{"pong":{"id":1}},{"hologram":{"x":1}},{},{"pong":{"id":2}}]}}',
    );
    assert.deepEqual(
      frames.map((f) => f.case === "pong" && f.value.id),
      [1, 2],
    );
  });

  test("accepts protojson's other spellings", () => {
    const [f] = decodeServer(
      '{"error":{"code":"CODE_RATE_LIMITED","retry_after_ms":"250","message":"slow down"},"extra":1}',
    );
    assert.deepEqual(f, {
      case: "error",
      value: { code: Code.RATE_LIMITED, message: "slow down", room: "", ref: "", retryAfterMs: 250, frame: "" },
    });
    const [m] = decodeServer('{"message":{"seq":"18","time_ms":1e3,"payload":null}}');
    assert.equal(m?.case === "message" && m.value.seq, 18);
    assert.equal(m?.case === "message" && m.value.timeMs, 1000);
    assert.equal(m?.case === "message" && m.value.payload, undefined);
  });

  test("an unknown kind alone decodes to nothing", () => {
    assert.deepEqual(decodeServer('{"hologram":{}}'), []);
  });

  test("malformed frames throw CodecError", () => {
    for (const bad of [
      "",
      "nope",
      "[]",
      '{"pong":{},"welcome":{}}',
      '{"message":{"seq":"x"}}',
      '{"message":{"seq":1.5}}',
      '{"message":{"room":1}}',
      '{"joined":{"resumed":"yes"}}',
      '{"batch":{"frames":{}}}',
      '{"message":"hi"}',
      '{"message":{"payloadBase64":"!!"}}',
    ]) {
      assert.throws(() => decodeServer(bad), CodecError, bad);
    }
  });
});

test("the generated tables and the protobuf-es types agree on the kinds", () => {
  // Both come from client.proto; this fails when one was not regenerated.
  const names = (fs: readonly { jsonName: string }[]) => fs.map((f) => f.jsonName).sort();
  assert.deepEqual(Object.keys(serverKinds).sort(), names(ServerFrameSchema.oneofs[0]!.fields));
  assert.deepEqual(Object.keys(clientKinds).sort(), names(ClientFrameSchema.oneofs[0]!.fields));
});
