/**
 * Runs `work` every `intervalMs`, never two runs at once (a run that outlasts the interval makes
 * the next tick pass), until the returned function is called. Errors go to `onError`, never
 * thrown. The timer does not keep the process alive. The worker's sweeps run on it.
 */
export function runEvery(
  intervalMs: number,
  work: () => Promise<unknown>,
  onError: (err: unknown) => void,
): () => void {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    work()
      .catch(onError)
      .finally(() => {
        running = false;
      });
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
