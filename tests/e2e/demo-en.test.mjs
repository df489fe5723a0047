// Demo mode for an English user: the "Try:" chips are English and so is every scripted reply,
// the meeting the assistant proposes has an English title on an English approval card, and the
// tenant's people keep their Chinese names. Screenshots: tests/e2e/artifacts/en-*.png.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';

import { freshDataDir, launch, shot, signInThroughCard, startDriver, step, waitForReply } from './harness.mjs';

let driver;
before(async () => {
  driver = await startDriver();
});
after(() => driver?.stop());

/** Chinese characters other than the tenant's people's names. */
function chineseIn(text) {
  return text.replace(/张伟|李娜|林晓/g, '').match(/[\u4e00-\u9fff]+/g) ?? [];
}

/** Clicks the chip (`testid`) whose words are `words`. */
async function clickChip(browser, testid, words) {
  const chips = await browser.$$(`[data-testid="${testid}"]`);
  const labels = [];
  for (const chip of chips) {
    // WebKitWebDriver's getText is empty inside a <button>.
    const label = String(await chip.getProperty('textContent')).trim();
    labels.push(label);
    if (label === words) {
      // The banner moves its examples into its "Try" menu when the window is too narrow for them
      // beside "Connect my Feishu" (the default window is): a person opens the menu first.
      if (testid === 'demo-example' && !(await chip.isDisplayed())) {
        await browser.$('[data-testid="demo-more"]').click();
        return clickChip(browser, 'demo-more-example', words);
      }
      await chip.click();
      step(`chip «${words}» clicked`);
      return;
    }
  }
  assert.fail(`no ${testid} chip says «${words}»: ${JSON.stringify(labels)}`);
}

describe('demo mode in English', () => {
  let browser;
  let dataDir;
  before(async () => {
    dataDir = await freshDataDir('demo-en', { language: 'en' });
    browser = await launch(driver, dataDir);
  });
  after(async () => {
    await browser?.deleteSession();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('the English chip gets the agenda in English', async () => {
    await browser.$('[data-testid="demo-banner"]').waitForDisplayed();
    await shot(browser, 'en-01-first-start');
    await clickChip(browser, 'example-prompt', 'What do I have tomorrow?');
    await signInThroughCard(browser, 'en-02-agenda');
    const seen = await waitForReply(browser, "I've looked at tomorrow");
    assert.match(seen, /Let me look at your calendar for tomorrow\./);
    assert.deepEqual(chineseIn(seen), [], `Chinese in the replies:\n${seen}`);
    await shot(browser, 'en-03-agenda');
  });

  test('the proposed meeting waits on an English approval card; approving creates it', async () => {
    await clickChip(browser, 'demo-example', 'Set up a product review meeting for me');
    const card = browser.$('[data-testid="approval-card"]');
    await card.waitForDisplayed({ timeout: 30000 });
    const text = await card.getText();
    assert.match(text, /Create the event “Product review” in your calendar and send invitations/);
    assert.match(text, /张伟/, 'the attendees by their names');
    assert.deepEqual(chineseIn(text), [], `Chinese on the card:\n${text}`);
    await shot(browser, 'en-04-approval-card');
    await card.$('[data-testid="approve"]').click();
    // Creating an event needs one more permission than reading it.
    await signInThroughCard(browser, 'en-05-create');
    const seen = await waitForReply(browser, 'Created “Product review”');
    assert.match(seen, /I'll set up a product review tomorrow from 15:00 to 16:00 and invite 张伟 and 李娜\./);
    assert.deepEqual(chineseIn(seen), [], `Chinese in the replies:\n${seen}`);
    await shot(browser, 'en-06-created');
  });
});
