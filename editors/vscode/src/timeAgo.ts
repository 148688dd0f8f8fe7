// "updated 3 minutes ago": a timestamp as people say it. Pure.

export function timeAgo(iso: string, now = Date.now()): string {
  const then = Date.parse(iso);
  if (Number.isNaN(then)) return iso;
  const s = Math.max(0, Math.round((now - then) / 1000));
  const ago = (n: number, unit: string) => `${n} ${unit}${n === 1 ? '' : 's'} ago`;
  if (s < 45) return 'just now';
  if (s < 90 * 60) return ago(Math.max(1, Math.round(s / 60)), 'minute');
  if (s < 36 * 3600) return ago(Math.round(s / 3600), 'hour');
  if (s < 30 * 86400) return ago(Math.round(s / 86400), 'day');
  return new Date(then).toISOString().slice(0, 10);
}
