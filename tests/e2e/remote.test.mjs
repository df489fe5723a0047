// Settings → Approve from Feishu in the real window (issue 18), in Chinese and in English: off by
// default, turned on "when I have been away for 15 minutes" with the section's own Save, kept
// after the page reloads, and the status saying a sign-in comes first (demo mode, nobody signed
// in). Screenshots: tests/e2e/artifacts/feishu-approval-setting-{zh,en}.png.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { shot, startDriver, step, withApp } from './harness.mjs';

let driver;
before(async () => {
  driver = await startDriver();
});
after(() => driver?.stop());

for (const lang of ['zh', 'en']) {
  test(`approving from Feishu is turned on in Settings (${lang})`, async () => {
    await withApp(driver, `remote-${lang}`, { language: lang }, async (browser) => {
      await browser.$('[data-testid="nav-settings"]').click();
      const section = browser.$('[data-testid="feishu-approval"]');
      await section.waitForExist({ timeout: 20000 });
      await section.scrollIntoView();
      const enabled = browser.$('[data-testid="remote-enabled"]');
      assert.equal(await enabled.isSelected(), false, 'off by default');
      await enabled.click();
      await browser.$('[data-testid="remote-away"]').click();
      const minutes = browser.$('[data-testid="remote-minutes"]');
      await minutes.waitForEnabled();
      await minutes.setValue('15');
      await browser.$('[data-testid="save-remote"]').click();
      await browser.$('[data-testid="feishu-approval"] [data-testid="saved-note"]').waitForDisplayed();
      step('saved');
      const status = browser.$('[data-testid="remote-status"]');
      await browser.waitUntil(async () => (await status.getAttribute('data-state')) === 'not_signed_in', {
        timeout: 15000,
        timeoutMsg: 'the status never said a sign-in comes first',
      });
      const text = await browser.execute(() => document.querySelector('[data-testid="remote-status"]').textContent);
      assert.match(text, lang === 'zh' ? /请先登录飞书/ : /sign in with Feishu first/);
      await section.scrollIntoView();
      await shot(browser, `feishu-approval-setting-${lang}`);

      // Saved for real: after a reload the section shows it as it was left.
      await browser.refresh();
      await browser.$('[data-testid="composer"]').waitForDisplayed({ timeout: 30000 });
      await browser.$('[data-testid="nav-settings"]').click();
      await browser.$('[data-testid="feishu-approval"]').waitForExist();
      assert.equal(await browser.$('[data-testid="remote-enabled"]').isSelected(), true);
      assert.equal(await browser.$('[data-testid="remote-away"]').isSelected(), true);
      assert.equal(await browser.$('[data-testid="remote-minutes"]').getValue(), '15');
    });
  });
}
