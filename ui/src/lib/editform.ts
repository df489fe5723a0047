// The arguments an approval's form editor offers, and the time format it edits them in.
import type { Key } from './i18n';

export interface FormField {
  key: string;
  label: Key;
  kind: 'line' | 'long' | 'time' | 'list';
}

/** The common fields, in the order the form shows them; only those a call has are shown. */
export const FORM_FIELDS: FormField[] = [
  { key: 'summary', label: 'field_title', kind: 'line' },
  { key: 'title', label: 'field_title', kind: 'line' },
  { key: 'start', label: 'field_start', kind: 'time' },
  { key: 'end', label: 'field_end', kind: 'time' },
  { key: 'due', label: 'field_due', kind: 'time' },
  { key: 'attendees', label: 'field_attendees', kind: 'list' },
  { key: 'text', label: 'field_text', kind: 'long' },
  { key: 'content', label: 'field_text', kind: 'long' },
  { key: 'description', label: 'field_description', kind: 'long' },
  { key: 'location', label: 'field_location', kind: 'line' },
];

/** Whether a call's arguments have anything the form edits. */
export function hasFormFields(args: Record<string, unknown>): boolean {
  return FORM_FIELDS.some((f) => f.key in args);
}

/** `2026-12-02T15:00:00+08:00` → its wall-clock part for a datetime-local input, and the rest. */
export function splitTime(v: string): { local: string; suffix: string } | null {
  const m = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2})(.*)$/.exec(v);
  return m ? { local: m[1], suffix: m[2] } : null;
}

/** The inverse of `splitTime`: the edited wall-clock time with the original seconds and offset. */
export function joinTime(local: string, suffix: string): string {
  return local + suffix;
}

/** A JSON.parse failure's line, when the engine says where (V8 and WebKit put it differently). */
export function jsonErrorLine(text: string, message: string): number | null {
  const line = /line (\d+)/i.exec(message);
  if (line) return Number(line[1]);
  const pos = /position (\d+)/i.exec(message);
  if (pos) return text.slice(0, Number(pos[1])).split('\n').length;
  return null;
}
