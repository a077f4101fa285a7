/** The host figures a node status reports: CPU usage since the previous sample, memory in use. */
import { cpus, freemem, totalmem } from "node:os";

/** Samples host CPU usage; each sample covers the time since the previous one (or construction). */
export class HostCpuSampler {
  private lastCpu = cpus().map((c) => c.times);

  /** Host CPU usage in [0, 1] since the previous call. */
  sample(): number {
    const now = cpus().map((c) => c.times);
    let idle = 0;
    let total = 0;
    now.forEach((t, i) => {
      const before = this.lastCpu[i] ?? { user: 0, nice: 0, sys: 0, idle: 0, irq: 0 };
      const sum = t.user + t.nice + t.sys + t.idle + t.irq - (before.user + before.nice + before.sys + before.idle + before.irq);
      total += sum;
      idle += t.idle - before.idle;
    });
    this.lastCpu = now;
    return total > 0 ? Math.min(1, Math.max(0, 1 - idle / total)) : 0;
  }
}

/** Host memory in use, in MB. */
export function hostUsedMemoryMb(): number {
  return Math.round((totalmem() - freemem()) / (1024 * 1024));
}
