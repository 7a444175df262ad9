// An example chat backend for corral's Postgres outbox (docs/OUTBOX.md):
// POST /rooms/:room/messages?user=U stores the message in the
// application's own table and its broadcast in corral_outbox, in one
// transaction. corral, started with --outbox on the same database,
// publishes each committed row to the room once, in commit order; a
// rolled-back transaction is never broadcast. The Go twin is
// examples/outbox-go.
//
// One request holds one pool connection for one short transaction (seed
// W4); the pool is bounded and a request that cannot get a connection
// within ACQUIRE_MS fails with 503 instead of queueing until a timeout.
//
//   corral serve --insecure-dev --outbox postgres://app@127.0.0.1/app
//   DATABASE_URL=postgres://app@127.0.0.1/app ADDR=127.0.0.1:8096 npm start
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import pg from "pg";

const pool = new pg.Pool({
  connectionString: process.env.DATABASE_URL,
  max: Number(process.env.POOL ?? 10),
  connectionTimeoutMillis: Number(process.env.ACQUIRE_MS ?? 1000),
});

// The application's own table; corral_outbox comes from corral's
// migrations (corral --outbox applies them at start).
await pool.query(`CREATE TABLE IF NOT EXISTS chat_messages (
  id bigserial PRIMARY KEY, room text NOT NULL, author text NOT NULL,
  body text NOT NULL, sent_at timestamptz NOT NULL DEFAULT now())`);

// post stores one message and its broadcast in one transaction and returns
// the message's id; the outbox row's idempotency key is the message's id.
export async function post(room: string, author: string, body: string): Promise<string> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    const { rows } = await client.query<{ id: string }>(
      "INSERT INTO chat_messages (room, author, body) VALUES ($1, $2, $3) RETURNING id",
      [room, author, body],
    );
    const id = rows[0].id;
    // Last in the transaction: the outbox row takes its room's lock
    // (commit order per room) until the commit.
    await client.query(
      "INSERT INTO corral_outbox (room, payload, idempotency_key, sender) VALUES ($1, $2, $3, $4)",
      [room, Buffer.from(JSON.stringify({ id: Number(id), body })), `chat:${id}`, author],
    );
    await client.query("COMMIT");
    return id;
  } catch (err) {
    await client.query("ROLLBACK").catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}

async function readBody(req: IncomingMessage): Promise<string> {
  let body = "";
  for await (const chunk of req) {
    body += chunk;
    if (body.length > 4096) throw new Error("body too large");
  }
  return body;
}

const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
  const url = new URL(req.url ?? "/", "http://x");
  const m = /^\/rooms\/([^/]+)\/messages$/.exec(url.pathname);
  if (req.method !== "POST" || !m) {
    res.writeHead(404).end();
    return;
  }
  try {
    const body = await readBody(req);
    if (!body) {
      res.writeHead(400).end("a message body, up to 4 KiB\n");
      return;
    }
    const id = await post(decodeURIComponent(m[1]), url.searchParams.get("user") ?? "", body);
    res.writeHead(200).end(`${id}\n`);
  } catch (err) {
    console.warn("post failed:", (err as Error).message);
    res.writeHead(503).end("try again\n");
  }
});

const [host, port] = (process.env.ADDR ?? "127.0.0.1:8096").split(":");
server.listen(Number(port), host, () => console.log(`listening on ${host}:${port}`));
const stop = () => server.close(() => pool.end());
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
