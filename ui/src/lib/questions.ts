// An MCP server's question to the user (elicitation), as its card reads it: the server's flat JSON
// schema as form fields, the values the form starts with, what is wrong with the values, and the
// JSON the answer sends back (each value of its schema's type: an integer is a number, not text).
import { errorMessage, isUiError } from './api';
import type { Key, Lang } from './i18n';

export type FieldKind = 'text' | 'email' | 'url' | 'date' | 'boolean' | 'integer' | 'number' | 'select' | 'multi';

/** One option of a select or a multi-select: the value the server gets, the label the user reads. */
export interface Choice {
  value: string | number | boolean;
  label: string;
}

export interface Field {
  name: string;
  /** The property's `title`, else its name. */
  label: string;
  /** The property's `description`. */
  help: string | null;
  required: boolean;
  kind: FieldKind;
  /** A select's or multi-select's options, in the schema's order. */
  choices: Choice[];
  minimum: number | null;
  maximum: number | null;
  minItems: number | null;
  maxItems: number | null;
  minLength: number | null;
  maxLength: number | null;
}

/** What a field's input holds: text as typed (numbers too, so a half-typed one is not lost), a
 *  checkbox's state, a select's chosen value (null: none), a multi-select's chosen values. */
export type FieldValue = string | boolean | Choice['value'] | null | Choice['value'][];
export type FormValues = Record<string, FieldValue>;

/** What is wrong with a field's value, as an i18n key and its parameters. */
export interface Problem {
  key: Key;
  params?: Record<string, string | number>;
}

type Json = Record<string, unknown>;
const obj = (v: unknown): Json | null => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : null);
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const str = (v: unknown): string | null => (typeof v === 'string' && v.trim() ? v : null);
const isChoiceValue = (v: unknown): v is Choice['value'] => typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';

/** `enum` (labelled by `enumNames` when given) or `oneOf`/`anyOf` of `{const, title}`. */
function choicesOf(p: Json): Choice[] | null {
  if (Array.isArray(p.enum)) {
    const names = Array.isArray(p.enumNames) ? p.enumNames : [];
    const out: Choice[] = [];
    p.enum.forEach((value, i) => {
      if (isChoiceValue(value) && !out.some((c) => c.value === value)) out.push({ value, label: str(names[i]) ?? String(value) });
    });
    return out.length ? out : null;
  }
  const list = Array.isArray(p.oneOf) ? p.oneOf : Array.isArray(p.anyOf) ? p.anyOf : null;
  if (!list) return null;
  const out: Choice[] = [];
  for (const item of list) {
    const o = obj(item);
    if (o && isChoiceValue(o.const)) out.push({ value: o.const, label: str(o.title) ?? String(o.const) });
  }
  return out.length ? out : null;
}

function kindOf(p: Json, choices: Choice[] | null, items: Choice[] | null): FieldKind {
  if (p.type === 'boolean') return 'boolean';
  if (p.type === 'array') return items ? 'multi' : 'text';
  if (choices) return 'select';
  if (p.type === 'integer') return 'integer';
  if (p.type === 'number') return 'number';
  switch (p.format) {
    case 'email':
      return 'email';
    case 'uri':
    case 'url':
      return 'url';
    case 'date':
      return 'date';
  }
  return 'text';
}

/** The form a server's schema asks for: one field per property, in the schema's order. Anything
 *  that is not an object schema has no fields. */
export function fieldsOf(schema: unknown): Field[] {
  const s = obj(schema);
  const props = obj(s?.properties);
  if (!s || !props) return [];
  const required = new Set(Array.isArray(s.required) ? s.required.filter((x): x is string => typeof x === 'string') : []);
  const fields: Field[] = [];
  for (const [name, raw] of Object.entries(props)) {
    const p = obj(raw) ?? {};
    const choices = choicesOf(p);
    const itemSchema = obj(p.items);
    const items = itemSchema ? choicesOf(itemSchema) : null;
    const kind = kindOf(p, choices, items);
    fields.push({
      name,
      label: str(p.title) ?? name,
      help: str(p.description),
      required: required.has(name),
      kind,
      choices: (kind === 'multi' ? items : kind === 'select' ? choices : null) ?? [],
      minimum: num(p.minimum),
      maximum: num(p.maximum),
      minItems: num(p.minItems),
      maxItems: num(p.maxItems),
      minLength: num(p.minLength),
      maxLength: num(p.maxLength),
    });
  }
  return fields;
}

/** The values the form starts with: the question's `defaults` (the schema's own), where they fit. */
export function initialValues(fields: Field[], defaults: Record<string, unknown> | null | undefined): FormValues {
  const out: FormValues = {};
  for (const f of fields) {
    const d = defaults?.[f.name];
    switch (f.kind) {
      case 'boolean':
        out[f.name] = typeof d === 'boolean' ? d : false;
        break;
      case 'integer':
      case 'number':
        out[f.name] = typeof d === 'number' && Number.isFinite(d) ? String(d) : typeof d === 'string' ? d : '';
        break;
      case 'select':
        out[f.name] = f.choices.some((c) => c.value === d) ? (d as Choice['value']) : null;
        break;
      case 'multi':
        out[f.name] = Array.isArray(d) ? f.choices.filter((c) => d.includes(c.value)).map((c) => c.value) : [];
        break;
      default:
        out[f.name] = typeof d === 'string' ? d : '';
    }
  }
  return out;
}

const blank = (v: FieldValue) => v === null || v === undefined || (typeof v === 'string' && v.trim() === '');

/** A field's value as JSON of its type; `undefined` when the field is left empty (so it is not sent). */
function jsonOf(f: Field, v: FieldValue): unknown {
  switch (f.kind) {
    case 'boolean':
      return v === true;
    case 'integer':
    case 'number':
      return blank(v) ? undefined : Number(String(v).trim());
    case 'select':
      return v === null ? undefined : v;
    case 'multi': {
      const list = Array.isArray(v) ? v : [];
      // Chosen in the schema's order, whatever order they were ticked in.
      const chosen = f.choices.filter((c) => list.includes(c.value)).map((c) => c.value);
      return chosen.length || f.required ? chosen : undefined;
    }
    default:
      return blank(v) ? undefined : String(v);
  }
}

const EMAIL = /^[^\s@]+@[^\s@]+$/;
const DATE = /^\d{4}-\d{2}-\d{2}$/;
function isUrl(s: string): boolean {
  try {
    return !!new URL(s).protocol;
  } catch {
    return false;
  }
}

/** What is wrong with each field's value, by name. A required field left empty is `q_required`. */
export function problemsOf(fields: Field[], values: FormValues): Record<string, Problem> {
  const out: Record<string, Problem> = {};
  for (const f of fields) {
    const v = jsonOf(f, values[f.name] ?? null);
    if (v === undefined) {
      if (f.required) out[f.name] = { key: 'q_required' };
      continue;
    }
    const p = problemOf(f, v);
    if (p) out[f.name] = p;
  }
  return out;
}

function problemOf(f: Field, v: unknown): Problem | null {
  if (f.kind === 'integer' || f.kind === 'number') {
    const n = v as number;
    if (!Number.isFinite(n)) return { key: 'q_not_number' };
    if (f.kind === 'integer' && !Number.isInteger(n)) return { key: 'q_not_integer' };
    if (f.minimum !== null && n < f.minimum) return { key: 'q_min', params: { n: f.minimum } };
    if (f.maximum !== null && n > f.maximum) return { key: 'q_max', params: { n: f.maximum } };
  } else if (f.kind === 'multi') {
    const n = (v as unknown[]).length;
    if (f.minItems !== null && n < f.minItems) return { key: 'q_too_few', params: { n: f.minItems } };
    if (f.maxItems !== null && n > f.maxItems) return { key: 'q_too_many', params: { n: f.maxItems } };
  } else if (typeof v === 'string') {
    const n = [...v].length;
    if (f.minLength !== null && n < f.minLength) return { key: 'q_min_length', params: { n: f.minLength } };
    if (f.maxLength !== null && n > f.maxLength) return { key: 'q_max_length', params: { n: f.maxLength } };
    if (f.kind === 'email' && !EMAIL.test(v.trim())) return { key: 'q_email' };
    if (f.kind === 'url' && !isUrl(v.trim())) return { key: 'q_url' };
    if (f.kind === 'date' && !DATE.test(v.trim())) return { key: 'q_date' };
  }
  return null;
}

/** The answer's `content`: each filled-in field as JSON of its schema's type; empty ones left out. */
export function contentOf(fields: Field[], values: FormValues): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of fields) {
    const v = jsonOf(f, values[f.name] ?? null);
    if (v !== undefined) out[f.name] = v;
  }
  return out;
}

/** The problems the card holds an answer back for. A required field left empty is not one of
 *  them: the core checks that itself and words the refusal, which the card then shows. */
export function blocking(problems: Record<string, Problem>): string[] {
  return Object.entries(problems)
    .filter(([, p]) => p.key !== 'q_required')
    .map(([name]) => name);
}

/** The host a URL question's page is on (shown plainly), or null if it is no http(s) URL. */
export function webHost(url: string | null | undefined): string | null {
  if (!url) return null;
  try {
    const u = new URL(url);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.host : null;
  } catch {
    return null;
  }
}

/** The core's refusal of an answer, in `lang`: its own words come as "中文 / English". */
export function refusalText(e: unknown, lang: Lang): string {
  const raw = isUiError(e) ? e.message : typeof e === 'string' ? e : null;
  if (raw) {
    const at = raw.indexOf(' / ');
    if (at > 0) return lang === 'zh' ? raw.slice(0, at) : raw.slice(at + 3);
  }
  return errorMessage(e, lang);
}
