// A tiny typed event emitter.

export type Listener<T> = (event: T) => void;

export class Emitter<Events> {
  private listeners = new Map<keyof Events, Set<Listener<never>>>();

  /** on adds a listener and returns a function that removes it. */
  on<K extends keyof Events>(type: K, fn: Listener<Events[K]>): () => void {
    let set = this.listeners.get(type);
    if (!set) this.listeners.set(type, (set = new Set()));
    set.add(fn as Listener<never>);
    return () => this.off(type, fn);
  }

  /** off removes a listener added with on. */
  off<K extends keyof Events>(type: K, fn: Listener<Events[K]>): void {
    this.listeners.get(type)?.delete(fn as Listener<never>);
  }

  protected emit<K extends keyof Events>(type: K, event: Events[K]): void {
    const set = this.listeners.get(type);
    if (!set) return;
    for (const fn of [...set]) {
      try {
        (fn as Listener<Events[K]>)(event);
      } catch (err) {
        // A listener's bug must not break the connection's state machine.
        queueMicrotask(() => {
          throw err;
        });
      }
    }
  }
}
