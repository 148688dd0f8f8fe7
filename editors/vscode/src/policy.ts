// The sandbox and approval policy in a person's words, and the choices the status bar's shield
// offers. Pure.

import type { PermissionPolicy, PermissionSetParams } from './protocol';

type PolicyView = PermissionPolicy;

const SANDBOX_WORDS: Record<string, string> = {
  'read-only': 'commands cannot write anything; edits are refused',
  'workspace-write': 'commands may write the workspace (not .git or .dsh), nothing else',
  'full-access': 'commands run without a sandbox',
};

export function policyTooltip(p: PolicyView): string {
  return [
    `Sandbox: ${p.sandbox} (${SANDBOX_WORDS[p.sandbox] ?? p.sandbox}); network ${p.network ? 'on' : 'off'}.`,
    `Asks before: ${p.approve.length ? p.approve.map((a) => (a === 'write' ? 'edits' : a === 'exec' ? 'commands' : a)).join(' and ') : 'nothing'}.`,
    'Click to change it for this session (until dshd restarts).',
  ].join('\n');
}

export interface PolicyChoice { label: string; description?: string; choice: Omit<PermissionSetParams, 'agentId'> }

export function policyChoices(p: PolicyView): PolicyChoice[] {
  const mark = (on: boolean) => (on ? '$(check) ' : '');
  const same = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((x) => b.includes(x));
  return [
    ...(['read-only', 'workspace-write', 'full-access'] as const).map((sandbox) => ({
      label: `${mark(p.sandbox === sandbox)}Sandbox: ${sandbox}`, description: SANDBOX_WORDS[sandbox], choice: { sandbox },
    })),
    { label: `${mark(same(p.approve, ['write', 'exec']))}Ask before edits and commands`, choice: { approve: ['write', 'exec'] } },
    { label: `${mark(same(p.approve, ['exec']))}Ask before commands only`, choice: { approve: ['exec'] } },
    { label: `${mark(p.approve.length === 0)}Ask before nothing`, description: 'edits and commands run at once', choice: { approve: [] } },
  ];
}
