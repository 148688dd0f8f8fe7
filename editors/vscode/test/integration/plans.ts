import { runAll } from './harness';
export async function run(): Promise<void> { await runAll(); }
