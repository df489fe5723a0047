import { describe, expect, it } from 'vitest';
import { blocking, contentOf, fieldsOf, initialValues, problemsOf, refusalText, webHost, type FormValues } from './questions';

// The form the official "everything" MCP server sends (trigger-elicitation-request), as it is.
const everything = {
  type: 'object',
  properties: {
    name: { title: 'String', type: 'string', description: 'Your full, legal name' },
    check: { title: 'Boolean', type: 'boolean', description: 'Agree to the terms and conditions' },
    firstLine: { title: 'String with default', type: 'string', description: 'Favorite first line of a story', default: 'It was a dark and stormy night.' },
    email: { title: 'String with email format', type: 'string', format: 'email', description: 'Your email address (will be verified, and never shared with anyone else)' },
    homepage: { type: 'string', format: 'uri', title: 'String with uri format', description: 'Portfolio / personal website' },
    birthdate: { title: 'String with date format', type: 'string', format: 'date', description: 'Your date of birth' },
    integer: { title: 'Integer', type: 'integer', description: 'Your favorite integer (do not give us your phone number, pin, or other sensitive info)', minimum: 1, maximum: 100, default: 42 },
    number: { title: 'Number in range 1-1000', type: 'number', description: 'Favorite number (there are no wrong answers)', minimum: 0, maximum: 1000, default: 3.14 },
    untitledSingleSelectEnum: { type: 'string', title: 'Untitled Single Select Enum', description: 'Choose your favorite friend', enum: ['Monica', 'Rachel', 'Joey', 'Chandler', 'Ross', 'Phoebe'], default: 'Monica' },
    untitledMultipleSelectEnum: { type: 'array', title: 'Untitled Multiple Select Enum', description: 'Choose your favorite instruments', minItems: 1, maxItems: 3, items: { type: 'string', enum: ['Guitar', 'Piano', 'Violin', 'Drums', 'Bass'] }, default: ['Guitar'] },
    titledSingleSelectEnum: { type: 'string', title: 'Titled Single Select Enum', description: 'Choose your favorite hero', oneOf: [{ const: 'hero-1', title: 'Superman' }, { const: 'hero-2', title: 'Green Lantern' }, { const: 'hero-3', title: 'Wonder Woman' }], default: 'hero-1' },
    titledMultipleSelectEnum: { type: 'array', title: 'Titled Multiple Select Enum', description: 'Choose your favorite types of fish', minItems: 1, maxItems: 3, items: { anyOf: [{ const: 'fish-1', title: 'Tuna' }, { const: 'fish-2', title: 'Salmon' }, { const: 'fish-3', title: 'Trout' }] }, default: ['fish-1'] },
    legacyTitledEnum: { type: 'string', title: 'Legacy Titled Single Select Enum', description: 'Choose your favorite type of pet', enum: ['pet-1', 'pet-2', 'pet-3', 'pet-4', 'pet-5'], enumNames: ['Cats', 'Dogs', 'Birds', 'Fish', 'Reptiles'], default: 'pet-1' },
  },
  required: ['name'],
};
/** The defaults as the core hands them to the card (each property's `default`). */
const defaults = Object.fromEntries(
  Object.entries(everything.properties).flatMap(([k, p]) => ('default' in p ? [[k, (p as { default: unknown }).default]] : [])),
);

describe('fieldsOf', () => {
  const fields = fieldsOf(everything);
  const by = (name: string) => fields.find((f) => f.name === name)!;

  it('one field per property, in the schema order, labelled by title with the description as help', () => {
    expect(fields.map((f) => f.name)).toEqual(Object.keys(everything.properties));
    expect(by('name')).toMatchObject({ label: 'String', help: 'Your full, legal name', required: true, kind: 'text' });
    expect(fields.filter((f) => f.required).map((f) => f.name)).toEqual(['name']);
  });
  it('maps each type and format to its input', () => {
    expect(Object.fromEntries(fields.map((f) => [f.name, f.kind]))).toEqual({
      name: 'text',
      check: 'boolean',
      firstLine: 'text',
      email: 'email',
      homepage: 'url',
      birthdate: 'date',
      integer: 'integer',
      number: 'number',
      untitledSingleSelectEnum: 'select',
      untitledMultipleSelectEnum: 'multi',
      titledSingleSelectEnum: 'select',
      titledMultipleSelectEnum: 'multi',
      legacyTitledEnum: 'select',
    });
    expect(by('integer')).toMatchObject({ minimum: 1, maximum: 100 });
    expect(by('titledMultipleSelectEnum')).toMatchObject({ minItems: 1, maxItems: 3 });
  });
  it('labels options by enumNames, oneOf/anyOf titles, or the value itself', () => {
    expect(by('legacyTitledEnum').choices.map((c) => [c.value, c.label])).toEqual([
      ['pet-1', 'Cats'],
      ['pet-2', 'Dogs'],
      ['pet-3', 'Birds'],
      ['pet-4', 'Fish'],
      ['pet-5', 'Reptiles'],
    ]);
    expect(by('titledSingleSelectEnum').choices.map((c) => c.label)).toEqual(['Superman', 'Green Lantern', 'Wonder Woman']);
    expect(by('titledMultipleSelectEnum').choices.map((c) => [c.value, c.label])).toEqual([
      ['fish-1', 'Tuna'],
      ['fish-2', 'Salmon'],
      ['fish-3', 'Trout'],
    ]);
    expect(by('untitledSingleSelectEnum').choices[1]).toEqual({ value: 'Rachel', label: 'Rachel' });
  });
  it('the name when there is no title; nothing for a schema that is not an object', () => {
    expect(fieldsOf({ type: 'object', properties: { project: { type: 'string' } } })[0]).toMatchObject({ label: 'project', help: null, required: false });
    expect(fieldsOf(null)).toEqual([]);
    expect(fieldsOf('x')).toEqual([]);
    expect(fieldsOf({ type: 'object' })).toEqual([]);
  });
});

describe('values', () => {
  const fields = fieldsOf(everything);
  const start = () => initialValues(fields, defaults);

  it('start from the defaults, in the form each input holds', () => {
    expect(start()).toEqual({
      name: '',
      check: false,
      firstLine: 'It was a dark and stormy night.',
      email: '',
      homepage: '',
      birthdate: '',
      integer: '42',
      number: '3.14',
      untitledSingleSelectEnum: 'Monica',
      untitledMultipleSelectEnum: ['Guitar'],
      titledSingleSelectEnum: 'hero-1',
      titledMultipleSelectEnum: ['fish-1'],
      legacyTitledEnum: 'pet-1',
    });
  });
  it('a default that is not one of the options is left out', () => {
    const f = fieldsOf({ type: 'object', properties: { a: { type: 'string', enum: ['x', 'y'] }, b: { type: 'array', items: { enum: ['p', 'q'] } } } });
    expect(initialValues(f, { a: 'z', b: ['q', 'r'] })).toEqual({ a: null, b: ['q'] });
  });
  it('go back as JSON of their types: integers and numbers as numbers, booleans, arrays; empty ones left out', () => {
    const v: FormValues = { ...start(), name: 'Ada Lovelace', integer: '7', number: '2.5', check: true, titledMultipleSelectEnum: ['fish-3', 'fish-1'] };
    const c = contentOf(fields, v);
    expect(c).toEqual({
      name: 'Ada Lovelace',
      check: true,
      firstLine: 'It was a dark and stormy night.',
      integer: 7,
      number: 2.5,
      untitledSingleSelectEnum: 'Monica',
      untitledMultipleSelectEnum: ['Guitar'],
      titledSingleSelectEnum: 'hero-1',
      // In the schema's order, whatever order they were ticked in.
      titledMultipleSelectEnum: ['fish-1', 'fish-3'],
      legacyTitledEnum: 'pet-1',
    });
    expect(typeof c.integer).toBe('number');
    expect('email' in c).toBe(false);
    // The defaults alone: a checkbox never ticked is still false (a checkbox has no "unset").
    expect(contentOf(fields, start())).toMatchObject({ check: false, integer: 42, number: 3.14 });
    expect('name' in contentOf(fields, start())).toBe(false);
  });
  it('a non-string enum keeps its type', () => {
    const f = fieldsOf({ type: 'object', properties: { n: { type: 'integer', enum: [1, 2, 3] } } });
    expect(f[0].kind).toBe('select');
    expect(contentOf(f, { n: 2 })).toEqual({ n: 2 });
  });
});

describe('problemsOf', () => {
  const fields = fieldsOf(everything);
  const start = () => initialValues(fields, defaults);

  it('a required field left empty (or blank) is required, and only that is left to the core', () => {
    expect(problemsOf(fields, start())).toEqual({ name: { key: 'q_required' } });
    expect(problemsOf(fields, { ...start(), name: '   ' })).toEqual({ name: { key: 'q_required' } });
    expect(blocking(problemsOf(fields, start()))).toEqual([]);
    expect(problemsOf(fields, { ...start(), name: 'Ada' })).toEqual({});
  });
  it('ranges, whole numbers, counts and formats', () => {
    const ok = { ...start(), name: 'Ada' };
    expect(problemsOf(fields, { ...ok, integer: '0' })).toEqual({ integer: { key: 'q_min', params: { n: 1 } } });
    expect(problemsOf(fields, { ...ok, integer: '101' })).toEqual({ integer: { key: 'q_max', params: { n: 100 } } });
    expect(problemsOf(fields, { ...ok, integer: '4.5' })).toEqual({ integer: { key: 'q_not_integer' } });
    expect(problemsOf(fields, { ...ok, number: '1000.5' }).number?.key).toBe('q_max');
    expect(problemsOf(fields, { ...ok, untitledMultipleSelectEnum: ['Guitar', 'Piano', 'Violin', 'Drums'] })).toEqual({
      untitledMultipleSelectEnum: { key: 'q_too_many', params: { n: 3 } },
    });
    expect(problemsOf(fields, { ...ok, email: 'not an email' })).toEqual({ email: { key: 'q_email' } });
    expect(problemsOf(fields, { ...ok, email: 'ada@example.com', homepage: 'example.com' })).toEqual({ homepage: { key: 'q_url' } });
    expect(problemsOf(fields, { ...ok, homepage: 'https://ada.dev', birthdate: '1815-12-10' })).toEqual({});
    expect(blocking(problemsOf(fields, { ...start(), integer: '0' }))).toEqual(['integer']);
  });
  it('a required multi-select left empty goes as [] and its minimum count says what is wrong', () => {
    const f = fieldsOf({ type: 'object', properties: { tags: { type: 'array', minItems: 1, items: { enum: ['a', 'b'] } } }, required: ['tags'] });
    expect(contentOf(f, { tags: [] })).toEqual({ tags: [] });
    expect(problemsOf(f, { tags: [] })).toEqual({ tags: { key: 'q_too_few', params: { n: 1 } } });
  });
  it('string lengths', () => {
    const f = fieldsOf({ type: 'object', properties: { code: { type: 'string', minLength: 4, maxLength: 6 } } });
    expect(problemsOf(f, { code: 'abc' })).toEqual({ code: { key: 'q_min_length', params: { n: 4 } } });
    expect(problemsOf(f, { code: 'abcdefg' })).toEqual({ code: { key: 'q_max_length', params: { n: 6 } } });
    expect(problemsOf(f, { code: '' })).toEqual({});
  });
});

describe('a URL question and a refusal', () => {
  it('shows only an http(s) page host', () => {
    expect(webHost('https://pay.example.com:8443/checkout?x=1')).toBe('pay.example.com:8443');
    expect(webHost('javascript:alert(1)')).toBeNull();
    expect(webHost('not a url')).toBeNull();
    expect(webHost(null)).toBeNull();
  });
  it('reads the core\'s "中文 / English" words in the user\'s language', () => {
    const e = { code: 'other', message: '「name」必填 / name is required', zh: '操作没有完成：「name」必填 / name is required', en: 'That did not work: 「name」必填 / name is required' };
    expect(refusalText(e, 'zh')).toBe('「name」必填');
    expect(refusalText(e, 'en')).toBe('name is required');
    expect(refusalText({ code: 'other', message: 'the server did not ask for x', zh: '操作没有完成：the server did not ask for x', en: 'That did not work: the server did not ask for x' }, 'zh')).toBe(
      '操作没有完成：the server did not ask for x',
    );
  });
});
