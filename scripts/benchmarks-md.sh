#!/usr/bin/env bash
# Rebuilds BENCHMARKS.md from the reports the bench scripts keep in docs/readme/ (each heading one
# level down), under a header naming the machine. Usage: bash scripts/benchmarks-md.sh "<date>"
set -euo pipefail
cd "$(dirname "$0")/.."
date="${1:?usage: scripts/benchmarks-md.sh <date of the runs>}"
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //; s/ [0-9]*-Core Processor//')
mem=$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)
{
  echo "# Benchmarks"
  echo
  echo "All numbers measured on this project's machine: $(nproc) cores ($cpu, Firecracker VM), $mem RAM, Linux $(uname -r | cut -d. -f1,2), on $date (each report names its Node.js version). Compare the ratios measured in the same run, not absolute numbers across tables or days (machines of this kind differ, and some runs shared the machine with other jobs; each report gives its load average). Each section below is the report its bench script wrote (\`npm run bench:kv\`, \`bench:queue\`, \`bench:vector\`), from \`docs/readme/\`."
  echo
  for f in kv-bench kv-perf queue-bench vector-bench node-bench metrics-bench; do
    echo
    sed 's/^#/##/' "docs/readme/$f.md"
  done
} > BENCHMARKS.md
