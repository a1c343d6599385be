#!/usr/bin/env node
// Entry point of the `svc` command: runs src/cli.ts through tsx (TypeScript, no build step).
import { register } from 'tsx/esm/api';
register();
await import('../src/cli.ts');
