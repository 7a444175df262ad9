// Where a Client keeps what it needs to resume after a reload: the session
// and, per room, the last seq it processed and the epoch of that seq; and
// the transport that last worked.

import { isTransportName, type TransportName } from "./transport.js";

/** The part of the Web Storage API a Client uses (sessionStorage fits). */
export interface StorageLike {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

export interface SessionState {
  session: { sessionId: string; resumeToken: string; userId: string } | null;
  rooms: Record<string, { seq: number; epoch: string }>;
}

export function loadState(storage: StorageLike | null, key: string): SessionState {
  const empty: SessionState = { session: null, rooms: {} };
  if (!storage) return empty;
  try {
    const raw = storage.getItem(key);
    if (!raw) return empty;
    const v = JSON.parse(raw) as Partial<SessionState>;
    const s = v.session;
    const session =
      s && typeof s.sessionId === "string" && typeof s.resumeToken === "string"
        ? { sessionId: s.sessionId, resumeToken: s.resumeToken, userId: String(s.userId ?? "") }
        : null;
    const rooms: SessionState["rooms"] = {};
    for (const [room, p] of Object.entries(v.rooms ?? {})) {
      if (p && Number.isSafeInteger(p.seq) && p.seq >= 0) rooms[room] = { seq: p.seq, epoch: String(p.epoch ?? "") };
    }
    return { session, rooms };
  } catch {
    return empty; // unreadable: start afresh
  }
}

export function saveState(storage: StorageLike | null, key: string, state: SessionState): void {
  if (!storage) return;
  try {
    if (!state.session && Object.keys(state.rooms).length === 0) storage.removeItem(key);
    else storage.setItem(key, JSON.stringify(state));
  } catch {
    // Full or disabled storage: resume then works within this page only.
  }
}

// The transport that last worked, with when to forget it (wall-clock ms):
// a fallback is about the network, which changes (another Wi-Fi, a proxy
// fixed), so the preferred transport is tried again after a while.

export function loadTransport(storage: StorageLike | null, key: string, nowMs: number): TransportName | null {
  if (!storage) return null;
  try {
    const raw = storage.getItem(key);
    if (!raw) return null;
    const v = JSON.parse(raw) as { transport?: unknown; until?: unknown };
    if (!isTransportName(v.transport) || typeof v.until !== "number" || v.until <= nowMs) return null;
    return v.transport;
  } catch {
    return null;
  }
}

export function saveTransport(storage: StorageLike | null, key: string, transport: TransportName, until: number): void {
  if (!storage) return;
  try {
    storage.setItem(key, JSON.stringify({ transport, until }));
  } catch {
    // Full or disabled storage: the choice lasts for this page only.
  }
}
