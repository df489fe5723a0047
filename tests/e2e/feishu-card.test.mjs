// Approving from Feishu, through the real window (issue 18): with the setting on ("always"), a
// meeting the assistant proposes waits on the app's card and, at the same time, reaches the
// signed-in user as a card from the app's bot in the (demo) emulator's Feishu. A tap on that card's
// Approve — made through the emulator's test hook, as Feishu delivers it over the long connection —
// decides the call: the app's card says it was approved in Feishu, and the meeting is created once.
// While the card waits in Feishu, the app's card says so; the tap's answer is the card's only update.
// Screenshots: tests/e2e/artifacts/feishu-card-{01-held,02-approved-in-feishu,03-created}.png.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { send, shot, signInForCards, signInThroughCard, startDriver, step, waitForReply, withApp } from './harness.mjs';

let driver;
before(async () => {
  driver = await startDriver();
});
after(() => driver?.stop());

async function json(url, init) {
  const res = await fetch(url, init);
  const body = await res.json();
  assert.ok(res.ok, `${url}: ${res.status} ${JSON.stringify(body)}`);
  return body;
}

async function bodyText(browser) {
  return String(await browser.execute(() => document.body.textContent));
}

test('a card approved in Feishu decides the call in the app, once', async () => {
  const settings = { remote_approval: { enabled: true, when: 'always', away_minutes: 15 } };
  await withApp(driver, 'feishu-card', settings, async (browser) => {
    // Cards go to the signed-in person: sign in first.
    const emulator = await signInForCards(browser);

    await send(browser, '帮我约个产品评审会');
    const card = browser.$('[data-testid="approval-card"]');
    await card.waitForDisplayed({ timeout: 30000 });
    let cards = [];
    await browser.waitUntil(
      async () => {
        cards = await json(`${emulator}/_emulator/cards`);
        return cards.length === 1;
      },
      { timeout: 20000, timeoutMsg: 'no approval card reached Feishu' },
    );
    const sent = JSON.stringify(cards[0].card);
    assert.match(sent, /产品评审会/, 'the Feishu card says what the app card says');
    assert.match(sent, /张伟/);
    // The app's card says, quietly, that a copy waits in Feishu.
    const inFeishu = card.$('[data-testid="in-feishu"]');
    await inFeishu.waitForExist({ timeout: 20000, timeoutMsg: 'the app card never said it was also sent to Feishu' });
    assert.equal(await inFeishu.getProperty('textContent'), '已同时发到飞书，可在手机上批准');
    await shot(browser, 'feishu-card-01-held');

    const outcome = await json(`${emulator}/_emulator/cards/${cards[0].message_id}/click`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'approve' }),
    });
    assert.equal(outcome.toast?.type, 'success', JSON.stringify(outcome.response));
    step('approved in Feishu');
    // The call goes straight on to ask for the create permission; its sign-in card says it was
    // approved in Feishu too, so the line stays whichever card is showing when it is read.
    await browser.waitUntil(async () => /已在飞书中批准/.test(await bodyText(browser)), {
      timeout: 20000,
      timeoutMsg: 'the app never showed the call as approved in Feishu',
    });
    await shot(browser, 'feishu-card-02-approved-in-feishu');
    assert.equal((await browser.$$('[data-testid="in-feishu"]')).length, 0, 'decided: no longer said to wait in Feishu');
    // Creating an event needs one more permission than reading: the app asks for it here.
    await signInThroughCard(browser, 'feishu-card-02');
    await waitForReply(browser, '已创建「产品评审会」');
    await shot(browser, 'feishu-card-03-created');
    const lines = await browser.$$('[data-testid="item-tool"] [data-testid="decision-line"]').map((l) => l.getProperty('textContent'));
    assert.deepEqual(lines, ['已在飞书中批准'], 'the done call still says where it was approved');

    // The Feishu card is final (no buttons) and a second tap decides nothing.
    const after = await json(`${emulator}/_emulator/cards/${cards[0].message_id}`);
    assert.doesNotMatch(JSON.stringify(after.card), /"tag":"button"/, 'no buttons left on the decided card');
    assert.deepEqual(
      after.versions.map((v) => v.source),
      ['send', 'callback'],
      "the click's answer updated the card, and nothing updated it again",
    );
    assert.equal((await json(`${emulator}/_emulator/cards`)).length, 1, 'one card for one call');
  });
});
