/**
 * A description of the machine a bench ran on, for the report header: core count (`nproc`, i.e.
 * the CPUs this process may use), CPU model from /proc/cpuinfo, RAM, kernel, Node version and the
 * UTC date. Linux-first; falls back to `node:os` elsewhere.
 */
import fs from 'node:fs';
import os from 'node:os';

export interface MachineInfo {
  nproc: number;
  cpuModel: string;
  ramGiB: number;
  kernel: string;
  node: string;
  /** ISO timestamp, UTC. */
  date: string;
}

/** Collects {@link MachineInfo}; never throws. */
export function machineInfo(): MachineInfo {
  let cpuModel = os.cpus()[0]?.model ?? 'unknown';
  try {
    const m = /^model name\s*:\s*(.+)$/m.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'));
    if (m) cpuModel = m[1].trim();
  } catch {
    /* not Linux */
  }
  const nproc = typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
  return {
    nproc,
    cpuModel,
    ramGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    kernel: `${os.type()} ${os.release()}`,
    node: process.version,
    date: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
  };
}

/** One line: `2 cores (nproc), AMD EPYC, 23.4 GiB RAM, Linux 6.1, Node v20.19.0, 2026-11-22T05:00:00Z`. */
export function describeMachine(m: MachineInfo = machineInfo()): string {
  return `${m.nproc} cores (nproc), ${m.cpuModel}, ${m.ramGiB} GiB RAM, ${m.kernel}, Node ${m.node}, ${m.date}`;
}
