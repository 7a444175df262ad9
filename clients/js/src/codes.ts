// What a client does after a close or an error code: docs/CODES.md.

import { Code } from "./gen/corral/v1/codes_pb.js";

export { Code };

/**
 * Advice is what a code's range tells a client to do next:
 * "resume" (reconnect and resume the session; nothing is lost), "retry"
 * (try again later), or "stop" (do not reconnect or repeat unchanged).
 */
export type Advice = "resume" | "retry" | "stop";

/**
 * adviceOf returns the advice for a corral code or a WebSocket close code.
 * Standard close codes (1001 going away, 1006 abnormal, and any other code
 * that is not corral's) mean the network or the peer ended the connection:
 * resume.
 */
export function adviceOf(code: number): Advice {
  if (code >= 4100 && code <= 4199) return "retry";
  if (code >= 4400 && code <= 4499) return "stop";
  return "resume";
}
