// An example backend for corral's hooks (docs/HOOKS.md) in TypeScript:
// corral.v1.HooksService served by Connect-ES over HTTP/2 without TLS
// (h2c, what corral calls for an http:// --hooks-url), against a toy user
// table. The same behaviour as examples/hooks-go:
//
//   npm ci && npm run generate && npm run build
//   node dist/server.js 127.0.0.1:9000
//   go run ./cmd/corral serve --insecure-dev \
//     --hooks-url http://127.0.0.1:9000 --config examples/hooks-go/corral.yaml
//
// A hello with token "alice" connects as alice, who may join team:blue
// and is refused team:red (error 4403, "members only"); an unknown token
// is closed with 4401.
import * as http2 from "node:http2";
import type { ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { HooksService } from "./gen/corral/v1/hooks_pb.js";
import { Code } from "./gen/corral/v1/codes_pb.js";

interface User {
  id: string;
  teams: string[];
}

// The toy user table, by token.
const users = new Map<string, User>([
  ["alice", { id: "alice", teams: ["blue"] }],
  ["bob", { id: "bob", teams: ["red"] }],
  ["carol", { id: "carol", teams: ["blue", "red"] }],
]);

function member(userId: string, room: string): boolean {
  if (!room.startsWith("team:")) return true;
  const team = room.slice("team:".length);
  for (const u of users.values()) if (u.id === userId) return u.teams.includes(team);
  return false;
}

// The hooks corral calls; the others answer unimplemented (corral calls
// only those its flags enable).
export function routes(router: ConnectRouter): void {
  router.service(HooksService, {
    connect(req) {
      const u = users.get(req.token);
      if (!u) return { refusal: { code: Code.UNAUTHENTICATED, reason: "unknown token" } };
      return {
        userId: u.id,
        join: ["*"],
        publish: ["*"],
        expiresUnix: BigInt(Math.floor(Date.now() / 1000) + 3600),
      };
    },
    // One result per pair, in the request's order.
    join(req) {
      return {
        results: req.pairs.map((p) =>
          member(p.userId, p.room) ? {} : { refusal: { code: Code.FORBIDDEN, reason: "members only" } },
        ),
      };
    },
    call(req) {
      if (req.method !== "whoami") return { refusal: { code: Code.INVALID_ARGUMENT, reason: "unknown method" } };
      return { payload: new TextEncoder().encode(JSON.stringify({ user: req.userId })) };
    },
  });
}

const [host, port] = (process.argv[2] ?? "127.0.0.1:9000").split(":");
http2.createServer(connectNodeAdapter({ routes })).listen(Number(port), host, () => {
  console.log(`hooks backend listening on ${host}:${port}`);
});
