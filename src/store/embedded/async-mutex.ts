/** Runs async critical sections one at a time, in call order. */
export class AsyncMutex {
  private tail: Promise<void> = Promise.resolve();

  run<T>(section: () => Promise<T>): Promise<T> {
    const result = this.tail.then(section);
    this.tail = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }

  /** Resolves once every section queued so far has finished. */
  idle(): Promise<void> {
    return this.tail;
  }
}
