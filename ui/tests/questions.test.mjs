// An MCP server's question in the middle of a call (elicitation) as a card above the composer,
// against the fake backend (window.__fake.ask): the official "everything" server's form is refused
// without its required field (the core's words on the card, the values kept), held back for a
// value out of range, then submitted with each value of its JSON type; a URL question opens its page
// only on the click, after answering "accept", and Decline sends "decline"; Dismiss sends "cancel";
// a question whose time ran out leaves; the sidebar counts them from anywhere. Screenshots go to
// /tmp/ui-shots3/ (zh and en, light and dark; not kept in the repository).
import fs from 'node:fs';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { useApp } from './harness.mjs';

const open = useApp();
const SHOTS = '/tmp/ui-shots3';
fs.mkdirSync(SHOTS, { recursive: true });

// The form the official "everything" MCP server sends (its trigger-elicitation-request tool), as it is.
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
const formQuestion = { message: 'Please provide inputs for the following fields:', schema: everything };
const urlQuestion = { kind: 'url', message: 'Please open the link to complete this action.', url: 'https://pay.example.com/checkout?session=7f3a9c' };

const words = {
  zh: { title: 'MCP 服务器「everything」需要你的输入', refused: '「name」必填', required: '必填', max: '不能大于 100', host: '页面位于 pay.example.com', expires: /分钟后过期/ },
  en: { title: 'The MCP server everything asks for your input', refused: 'name is required', required: 'Required', max: 'At most 100', host: 'The page is on pay.example.com', expires: /^expires in / },
};

const ask = (page, q, o) => page.evaluate(([q, o]) => window.__fake.ask(q, o), [q, o]);
const answers = (page) => page.evaluate(() => window.__fake.answers);
const calls = (page, cmd) => page.evaluate((c) => window.__fake.commandsCalled(c).length, cmd);
const field = (card, name) => card.locator(`[data-name="${name}"]`);

for (const [locale, lang] of [['zh-CN', 'zh'], ['en-US', 'en']]) {
  const w = words[lang];

  test(`the everything server's form: refused without its required field, then submitted with JSON types (${lang})`, async () => {
    const page = await open({ locale });
    const id = await ask(page, formQuestion);
    const card = page.locator(`[data-testid="mcp-question"][data-question-id="${id}"]`);
    await card.waitFor();
    // Above the composer, in the conversation.
    assert.equal(await page.locator('.composer-wrap [data-testid="mcp-questions"] + .composer, .composer-wrap [data-testid="mcp-questions"] ~ .composer').count(), 1);
    assert.equal(await card.getByTestId('question-title').innerText(), w.title);
    assert.equal(await card.getByTestId('question-message').innerText(), 'Please provide inputs for the following fields:');
    assert.match(await card.getByTestId('question-countdown').innerText(), w.expires);
    assert.equal(await page.getByTestId('questions-count').innerText(), '1');

    // One field per property, labelled by title, described, the required one marked, defaults in.
    assert.equal(await card.locator('[data-field]').count(), 13);
    assert.match(await field(card, 'name').locator('.lbl').innerText(), /^String\s*\*$/);
    assert.equal(await field(card, 'name').locator('input').getAttribute('aria-required'), 'true');
    assert.equal(await field(card, 'firstLine').locator('.req').count(), 0);
    assert.match(await field(card, 'name').innerText(), /Your full, legal name/);
    assert.equal(await field(card, 'email').locator('input').getAttribute('type'), 'email');
    assert.equal(await field(card, 'homepage').locator('input').getAttribute('type'), 'url');
    assert.equal(await field(card, 'birthdate').locator('input').getAttribute('type'), 'date');
    assert.equal(await field(card, 'integer').locator('input').inputValue(), '42');
    assert.equal(await field(card, 'integer').locator('input').getAttribute('max'), '100');
    assert.equal(await field(card, 'firstLine').locator('input').inputValue(), 'It was a dark and stormy night.');
    assert.equal(await field(card, 'check').locator('input[type="checkbox"]').isChecked(), false);
    const selected = (name) => field(card, name).locator('select').evaluate((s) => s.selectedOptions[0]?.textContent);
    assert.equal(await selected('titledSingleSelectEnum'), 'Superman');
    assert.equal(await selected('legacyTitledEnum'), 'Cats');
    assert.deepEqual(await field(card, 'legacyTitledEnum').locator('option:not([value=""])').allInnerTexts(), ['Cats', 'Dogs', 'Birds', 'Fish', 'Reptiles']);
    assert.equal(await field(card, 'legacyTitledEnum').locator('option[value=""]').count(), 1, 'an optional select can be left empty');
    assert.deepEqual(await field(card, 'titledMultipleSelectEnum').locator('label').allInnerTexts(), ['Tuna', 'Salmon', 'Trout']);
    assert.equal(await field(card, 'titledMultipleSelectEnum').locator('input[data-value="fish-1"]').isChecked(), true);

    // Submit without the name: the core refuses in the user's language; nothing is lost.
    await field(card, 'email').locator('input').fill('ada@example.com');
    await card.getByTestId('question-submit').click();
    await card.getByTestId('question-refusal').waitFor();
    assert.equal(await card.getByTestId('question-refusal').innerText(), w.refused);
    assert.equal(await calls(page, 'answer_mcp_question'), 1);
    assert.deepEqual(await answers(page), []);
    assert.equal(await field(card, 'name').getByTestId('question-problem').innerText(), w.required);
    assert.equal(await field(card, 'email').locator('input').inputValue(), 'ada@example.com');
    assert.equal(await field(card, 'firstLine').locator('input').inputValue(), 'It was a dark and stormy night.');

    // A value out of range is held back on the card (the core does not check ranges; the server would fail the call).
    await field(card, 'integer').locator('input').fill('500');
    await card.getByTestId('question-submit').click();
    await field(card, 'integer').getByTestId('question-problem').waitFor();
    assert.equal(await field(card, 'integer').getByTestId('question-problem').innerText(), w.max);
    assert.equal(await calls(page, 'answer_mcp_question'), 1, 'nothing sent');

    // Fill it in and press Enter in a field: submitted, each value of its type.
    await field(card, 'integer').locator('input').fill('7');
    await field(card, 'check').locator('input').check();
    await field(card, 'titledMultipleSelectEnum').locator('input[data-value="fish-2"]').check();
    await field(card, 'legacyTitledEnum').locator('select').selectOption({ label: 'Dogs' });
    await field(card, 'name').locator('input').fill('Ada Lovelace');
    await field(card, 'name').locator('input').press('Enter');
    await card.waitFor({ state: 'detached' });
    const [a] = await answers(page);
    assert.deepEqual(a, {
      id,
      action: 'accept',
      content: {
        name: 'Ada Lovelace',
        check: true,
        firstLine: 'It was a dark and stormy night.',
        email: 'ada@example.com',
        integer: 7,
        number: 3.14,
        untitledSingleSelectEnum: 'Monica',
        untitledMultipleSelectEnum: ['Guitar'],
        titledSingleSelectEnum: 'hero-1',
        titledMultipleSelectEnum: ['fish-1', 'fish-2'],
        legacyTitledEnum: 'pet-2',
      },
    });
    assert.equal(await page.getByTestId('nav-questions').count(), 0);
    assert.deepEqual(page.errors, []);
  });

  test(`a URL question opens its page only on Open, after answering accept; Decline answers decline (${lang})`, async () => {
    const page = await open({ locale });
    const id = await ask(page, urlQuestion);
    const card = page.locator(`[data-testid="mcp-question"][data-question-id="${id}"]`);
    await card.waitFor();
    assert.equal(await card.getAttribute('data-kind'), 'url');
    assert.equal(await card.getByTestId('question-message').innerText(), 'Please open the link to complete this action.');
    assert.match(await card.getByTestId('question-url').innerText(), new RegExp(w.host.replace(/\./g, '\\.')));
    assert.equal(await card.getByTestId('question-host').innerText(), 'pay.example.com');
    assert.equal(await card.getByTestId('question-submit').count(), 0);
    await page.waitForTimeout(100);
    assert.equal(await calls(page, 'open_link'), 0, 'never opened without the click');

    await card.getByTestId('question-open').click();
    await card.waitFor({ state: 'detached' });
    await page.waitForFunction(() => window.__fake.commandsCalled('open_link').length === 1);
    assert.deepEqual(await answers(page), [{ id, action: 'accept', content: null }]);
    const order = await page.evaluate(() => window.__fake.log.map((l) => l.cmd).filter((c) => c === 'answer_mcp_question' || c === 'open_link'));
    assert.deepEqual(order, ['answer_mcp_question', 'open_link'], 'answered first, then opened');
    assert.deepEqual((await page.evaluate(() => window.__fake.commandsCalled('open_link')))[0].args, { url: urlQuestion.url });

    const id2 = await ask(page, urlQuestion);
    const card2 = page.locator(`[data-question-id="${id2}"]`);
    await card2.getByTestId('question-decline').click();
    await card2.waitFor({ state: 'detached' });
    assert.deepEqual((await answers(page))[1], { id: id2, action: 'decline', content: null });
    assert.equal(await calls(page, 'open_link'), 1, 'Decline opens nothing');
    assert.deepEqual(page.errors, []);
  });
}

test('Dismiss answers cancel; Esc only leaves the field; a question whose time ran out leaves', async () => {
  const page = await open({ locale: 'en-US' });
  const id = await ask(page, formQuestion);
  const card = page.locator(`[data-question-id="${id}"]`);
  const name = field(card, 'name').locator('input');
  await name.fill('typed');
  await name.press('Escape');
  assert.equal(await page.evaluate(() => document.activeElement?.dataset.testid), 'mcp-question', 'focus left the field for the card');
  assert.equal(await calls(page, 'answer_mcp_question'), 0, 'Esc answers nothing');
  assert.equal(await name.inputValue(), 'typed');
  await card.getByTestId('question-dismiss').click();
  await card.waitFor({ state: 'detached' });
  assert.deepEqual(await answers(page), [{ id, action: 'cancel', content: null }]);

  // The core keeps this one past its time (sweep: false): the card leaves on its own.
  const late = await ask(page, { ...urlQuestion, expires_at: Date.now() + 2500 }, { sweep: false });
  const lateCard = page.locator(`[data-question-id="${late}"]`);
  await lateCard.waitFor();
  assert.match(await lateCard.getByTestId('question-countdown').innerText(), /^expires in \d+s$/);
  assert.equal(await lateCard.getByTestId('question-countdown').getAttribute('class').then((c) => c.includes('soon')), true);
  await lateCard.waitFor({ state: 'detached', timeout: 5000 });
  assert.equal(await page.getByTestId('nav-questions').count(), 0);
  assert.equal(await page.evaluate(() => window.__fake.questions.length), 1, 'the UI dropped it, not the fake');
  assert.deepEqual(page.errors, []);
});

test('the sidebar counts questions from anywhere and goes to them', async () => {
  const page = await open({ locale: 'zh-CN' });
  await page.getByTestId('nav-settings').click();
  await ask(page, formQuestion);
  await ask(page, urlQuestion);
  const nav = page.getByTestId('nav-questions');
  await nav.waitFor();
  assert.equal(await page.getByTestId('questions-count').innerText(), '2');
  assert.equal(await page.getByTestId('mcp-question').count(), 0, 'not on the settings page');
  await nav.click();
  await page.getByTestId('composer').waitFor();
  assert.equal(await page.getByTestId('mcp-question').count(), 2);
  // The first question's first field has the focus.
  assert.equal(await page.evaluate(() => document.activeElement?.closest('[data-name]')?.dataset.name), 'name');
  assert.deepEqual(page.errors, []);
});

// Screenshots: the whole window with the form above the composer, and each card on its own.
for (const scheme of ['light', 'dark'])
  for (const [locale, lang] of [['zh-CN', 'zh'], ['en-US', 'en']])
    test(`screenshots: the form and URL questions (${lang}, ${scheme})`, async () => {
      const page = await open({ locale, colorScheme: scheme, height: 900 });
      const id = await ask(page, formQuestion);
      const card = page.locator(`[data-question-id="${id}"]`);
      await card.waitFor();
      await page.screenshot({ path: `${SHOTS}/form-window-${lang}-${scheme}.png` });
      // The whole card, then the same refused (a tall viewport so the list does not scroll it).
      await page.setViewportSize({ width: 1280, height: 2400 });
      await card.screenshot({ path: `${SHOTS}/form-${lang}-${scheme}.png` });
      await card.getByTestId('question-submit').click();
      await card.getByTestId('question-refusal').waitFor();
      await card.screenshot({ path: `${SHOTS}/form-refused-${lang}-${scheme}.png` });
      await card.getByTestId('question-dismiss').click();
      await card.waitFor({ state: 'detached' });
      await page.setViewportSize({ width: 1280, height: 800 });
      const uid = await ask(page, urlQuestion);
      await page.locator(`[data-question-id="${uid}"]`).waitFor();
      await page.screenshot({ path: `${SHOTS}/url-window-${lang}-${scheme}.png` });
      await page.locator(`[data-question-id="${uid}"]`).screenshot({ path: `${SHOTS}/url-${lang}-${scheme}.png` });
      assert.deepEqual(page.errors, []);
    });
