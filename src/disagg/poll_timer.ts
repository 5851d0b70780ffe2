// A polling timer of the PD loops: while the loop has entries waiting (transfers, bootstrap lookups), it kicks the
// engine loop every `periodMs` so that timeouts and freed memory are noticed; it stops itself when nothing waits.

/** Kicks `kick` every `periodMs` ms while `busy()` holds; started on demand by ensure(), stopped by stop(). */
export class PollTimer {
  private timer: NodeJS.Timeout | null = null;

  /**
   * @param periodMs polling period, ms
   * @param busy whether anything still waits (checked at each tick; false stops the timer)
   * @param kick wakes the engine loop
   */
  constructor(private readonly periodMs: number, private readonly busy: () => boolean, private readonly kick: () => void) {}

  /** Starts polling unless already running. */
  ensure(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      if (!this.busy()) this.stop();
      else this.kick();
    }, this.periodMs);
  }

  /** Stops polling (idempotent). */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
