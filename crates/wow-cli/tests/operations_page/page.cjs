// The operations page in headless Chromium, driven by Playwright: run by
// `operations_page.rs` with WOW_UI_BASE (the service), WOW_UI_CHROMIUM, WOW_UI_SCREENSHOTS
// and NODE_PATH (where playwright-core is installed). Exits non-zero at the first check that
// fails, saying which.
'use strict';

const path = require('node:path');
const { chromium } = require('playwright-core');

const base = process.env.WOW_UI_BASE;
const shots = process.env.WOW_UI_SCREENSHOTS;
const TIMEOUT = 15000;

function check(condition, what) {
  if (!condition) throw new Error(`check failed: ${what}`);
  console.log(`ok - ${what}`);
}

/** A call of the service's JSON API as tenant `token`'s client. */
async function api(method, route, token, body, headers = {}) {
  const response = await fetch(base + route, {
    method,
    headers: {
      'Content-Type': 'application/json',
      ...(token ? { Authorization: `Bearer ${token}` } : {}),
      ...headers,
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let json = null;
  try { json = JSON.parse(text); } catch { json = text; }
  return { status: response.status, json };
}

/** Turns a fault of the test's service on or off. */
async function fault(name, on) {
  const { status } = await api('POST', `/test/${name}/${on ? 'on' : 'off'}`);
  if (status !== 204) throw new Error(`fault ${name}: ${status}`);
}

function command(token, aggregate, id, name, body, requestId, stage = 'PROCESSED') {
  return api('POST', `/${aggregate}/${id}/${name}`, token, body, {
    'Command-Request-Id': requestId,
    'Command-Wait-Stage': stage,
    'Command-Wait-Timeout': '10000',
  });
}

async function main() {
  // Tenant-a's history: an account, a deposit a consumer fails on, a rejection, a broken one.
  let r = await command('ta', 'account', 'alice', 'open', { name: 'Alice', balance: 100 }, 'open-alice', 'PROJECTED');
  check(r.status === 200, `alice opened (${r.status} ${JSON.stringify(r.json)})`);
  await fault('consumer', true);
  r = await command('ta', 'account', 'alice', 'deposit', { amount: 5 }, 'dep-1', 'PROJECTED');
  check(r.json.errorCode !== 'Ok' && r.json.stage === 'PROJECTED', `the ledger failed at PROJECTED (${r.json.errorCode})`);
  r = await command('ta', 'account', 'alice', 'deposit', { amount: 2 }, 'dep-2', 'PROJECTED');
  check(r.json.errorCode === 'StreamParked', `alice's next deposit waits behind it (${r.json.errorCode})`);
  r = await command('ta', 'account', 'carol', 'open', { name: 'Carol', balance: 1 }, 'open-carol', 'PROJECTED');
  check(r.json.errorCode !== 'Ok', `carol's open fails for the ledger too (${r.json.errorCode})`);
  r = await command('ta', 'account', 'alice', 'withdraw', { amount: 1000 }, 'w-1');
  check(r.status === 422, `an overdraft is rejected (${r.status})`);
  r = await api('POST', '/test/corrupt/tenant-a/broken');
  check(r.status === 204, 'a stream the account cannot read');
  await command('ta', 'account', 'broken', 'deposit', { amount: 1 }, 'b-1');
  r = await api('GET', '/health', 'ta');
  check(r.json.details.quarantined.length === 1, 'the broken account is quarantined');

  const browser = await chromium.launch({
    executablePath: process.env.WOW_UI_CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = await browser.newPage({ viewport: { width: 1000, height: 680 } });
  page.setDefaultTimeout(TIMEOUT);
  const errors = [];
  page.on('pageerror', (error) => errors.push(String(error)));
  const shot = (name) => page.screenshot({ path: path.join(shots, `${name}.png`) });
  const loaded = (view) => page.waitForSelector(`#view-${view}[data-loaded="true"]`);
  const text = (selector) => page.textContent(selector).then((t) => (t || '').trim());

  async function signIn(token) {
    await page.waitForSelector('#token-form', { state: 'visible' });
    await page.fill('#token', token);
    await page.click('#token-submit');
  }

  // The page is the operator's: not served without the operator token, nor to a tenant's.
  let opened = await page.goto(`${base}/ui#failures`);
  check(opened.status() === 401, `no page without the operator token (${opened.status()})`);
  opened = await page.goto(`${base}/ui?token=ta`);
  check(opened.status() === 403, `no page for a tenant's token (${opened.status()})`);
  // Signed in once by the query: redirected to the page, which loads with the cookie.
  opened = await page.goto(`${base}/ui?token=op#failures`);
  check(opened.status() === 200 && new URL(page.url()).search === '', `the operator token signs the page in and leaves the address (${page.url()})`);
  const cookies = await page.context().cookies(base);
  const cookie = cookies.find((c) => c.name === 'wow-operator');
  check(cookie && cookie.httpOnly && cookie.sameSite === 'Strict', 'in an HttpOnly, SameSite=Strict cookie');
  check(await page.evaluate(() => document.cookie) === '', 'that no script reads');

  // Tenant auth is on too: the page asks for a tenant's token for the tenant's views.
  await page.waitForSelector('body[data-ready="true"]');
  await signIn('ta');
  await loaded('failures');

  // The failing consumer shows up.
  const row = page.locator('tr.failure-row', { hasText: 'ledger' });
  await row.first().waitFor();
  check(await row.count() === 2, 'two failures of the ledger (alice, carol)');
  const alice = page.locator('tr.failure-row', { hasText: 'alice' });
  check((await alice.locator('.status').textContent()).trim() === 'FAILED', 'it is FAILED');
  const lane = page.locator('tr.parked-row', { hasText: 'alice' });
  await lane.waitFor();
  const cells = await lane.locator('td').allTextContents();
  check(cells[2] === '2' && cells[3] === '3' && cells[4] === '1', `alice's deposit 3 is parked behind version 2 (${cells})`);
  await shot('failures');

  // Carol's failure skipped: refused without the operator's token, recorded with it.
  await page.locator('tr.failure-row', { hasText: 'carol' }).locator('.details-button').click();
  await page.waitForSelector('#failure-detail[data-loaded="true"]');
  check(await page.isVisible('#skip-now'), 'a FAILED record can be skipped');
  await page.click('#skip-now');
  await page.waitForFunction(() => /Forbidden|Unauthorized/.test(document.querySelector('#status')?.textContent || ''));
  check((await text('#detail-status')) === 'FAILED', `a tenant's token does not skip (${await text('#status')})`);
  await page.fill('#skip-token', 'op');
  await page.click('#skip-now');
  await page.waitForFunction(() => document.querySelector('#detail-status')?.textContent.trim() === 'SKIPPED');
  check((await text('#detail-fields')).includes('operator:'), 'SKIPPED, by the operator token\'s fingerprint');
  await page.click('#detail-close');

  // Its detail, with the events it failed on; retried after the fault is fixed.
  await alice.locator('.details-button').click();
  await page.waitForSelector('#failure-detail', { state: 'visible' });
  // The events come in a request of their own after the panel opens ("Loading…" until then).
  await page.waitForSelector('#failure-detail[data-loaded="true"]');
  check((await text('#detail-events')).includes('Deposited'), 'the detail shows the Deposited event');
  await page.evaluate(() => { document.querySelector('.table-wrap').scrollLeft = 0; });
  await page.locator('#failure-detail').scrollIntoViewIfNeeded();
  await shot('failure-detail');

  // An operator's edits of alice's record: refused with the tenant's token, recorded with the
  // operator's (who, on the record).
  const field = (name) => page.evaluate((name) => {
    const dt = [...document.querySelectorAll('#detail-fields dt')].find((d) => d.textContent === name);
    return dt ? dt.nextElementSibling.textContent : null;
  }, name);
  const fieldIs = (name, value) => page.waitForFunction(([name, value]) => {
    const dt = [...document.querySelectorAll('#detail-fields dt')].find((d) => d.textContent === name);
    return !!dt && dt.nextElementSibling.textContent.includes(value);
  }, [name, value]);
  check((await field('Recoverable')) === 'UNKNOWN', 'a record is not judged until an operator does');
  await page.fill('#skip-token', '');
  await page.click('#mark-unrecoverable');
  await page.waitForFunction(() => /Forbidden|Unauthorized/.test(document.querySelector('#status')?.textContent || ''));
  check((await field('Recoverable')) === 'UNKNOWN', `a tenant's token does not judge it (${await text('#status')})`);
  await page.fill('#skip-token', 'op');
  await page.click('#mark-unrecoverable');
  await fieldIs('Recoverable', 'UNRECOVERABLE');
  check((await field('Updated by')).startsWith('operator:'), 'UNRECOVERABLE, by the operator token\'s fingerprint');
  r = await api('GET', '/compensation/failures?recoverable=UNRECOVERABLE', 'ta');
  check(r.json.length === 1 && r.json[0].aggregateId.aggregateId === 'alice', `the list filters by it (${JSON.stringify(r.json)})`);
  await page.click('#mark-recoverable');
  await page.waitForFunction(() => {
    const dt = [...document.querySelectorAll('#detail-fields dt')].find((d) => d.textContent === 'Recoverable');
    return !!dt && dt.nextElementSibling.textContent === 'RECOVERABLE';
  });
  check(true, 'marked RECOVERABLE again');
  await page.fill('#spec-max-attempts', '7');
  await page.fill('#spec-initial-backoff', '100');
  await page.fill('#spec-max-backoff', '1000');
  await page.click('#spec-save');
  await fieldIs('Retry spec', '7 attempts');
  r = await api('GET', '/compensation/failures?consumer=ledger&aggregateId=alice', 'ta');
  check(r.json.length === 1 && r.json[0].retrySpec && r.json[0].retrySpec.maxAttempts === 7
    && r.json[0].retrySpec.initialBackoffMs === 100 && r.json[0].retrySpec.maxBackoffMs === 1000,
    `the retry spec is the record's (${JSON.stringify(r.json)})`);
  await fault('consumer', false);
  await page.click('#retry-now');
  await page.waitForFunction(() => document.querySelector('#detail-status')?.textContent.trim() === 'SUCCEEDED');
  check(true, 'Retry now turned it to SUCCEEDED');
  r = await api('GET', '/compensation/failures?consumer=ledger&status=SUCCEEDED', 'ta');
  check(r.json.length === 1 && r.json[0].aggregateId.aggregateId === 'alice', `the record says SUCCEEDED too (${JSON.stringify(r.json)})`);
  await page.click('#detail-close');
  await page.click('#refresh-failures');
  await loaded('failures');
  await page.waitForSelector('#parked-empty', { state: 'visible' });
  check(true, 'the retry ran the parked deposit: no lane is left');

  // Filters by status and consumer.
  await page.selectOption('#filter-status', 'FAILED');
  await page.click('#filter-apply');
  await loaded('failures');
  // Still FAILED: the broken account's processing, recorded when it was quarantined.
  await page.locator('tr.failure-row', { hasText: 'wow.aggregate_processor' }).first().waitFor();
  check(await page.locator('tr.failure-row', { hasText: 'ledger' }).count() === 0, 'the ledger is no longer FAILED');
  await page.fill('#filter-consumer', 'ledger');
  await page.click('#filter-apply');
  await loaded('failures');
  await page.waitForSelector('#failures-empty', { state: 'visible' });
  check(true, 'no FAILED record of the ledger');
  await page.selectOption('#filter-status', 'SUCCEEDED');
  await page.fill('#filter-consumer', 'ledger');
  await page.click('#filter-apply');
  await loaded('failures');
  await page.locator('tr.failure-row', { hasText: 'ledger' }).first().waitFor();
  check(true, 'the SUCCEEDED ledger record, filtered by status and consumer');
  // By aggregate id, with the total of every page.
  await page.selectOption('#filter-status', '');
  await page.fill('#filter-consumer', '');
  await page.fill('#filter-aggregate-id', 'carol');
  await page.click('#filter-apply');
  await loaded('failures');
  const carolRows = page.locator('tr.failure-row');
  await carolRows.first().waitFor();
  const carols = await carolRows.count();
  check(carols === await page.locator('tr.failure-row', { hasText: 'carol' }).count(), 'only carol\'s records');
  check((await text('#failures-total')).startsWith(`${carols} `), `the total is shown (${await text('#failures-total')})`);
  await page.fill('#filter-aggregate-id', '');

  // A view rebuilt beside the live one, from the page, with the operator's token. The
  // broken account's history holds a stream the view cannot read: the rebuild stops FAILED,
  // naming it, and readers stay on the rows they had.
  await page.click('#tab-rebuilds');
  await loaded('rebuilds');
  const balances = page.locator('tr.rebuild-row', { hasText: 'account_balance' });
  await balances.waitFor();
  await page.fill('#rebuild-token', 'op');
  await balances.locator('.rebuild-button').click();
  await page.waitForFunction(() => [...document.querySelectorAll('tr.rebuild-row')]
    .some((tr) => tr.textContent.includes('FAILED')), null, { timeout: 30000 });
  check((await balances.locator('.rebuild-error').textContent()).includes('broken'), 'the rebuild stopped FAILED on the broken account\'s stream');
  check(await balances.locator('.rebuild-button').isEnabled(), 'it can be started again');
  r = await api('GET', '/account/alice/view/account_balance', 'ta');
  check(r.status === 200 && r.json.state.balance === 107, `its readers read the rows they had (${JSON.stringify(r.json)})`);
  await shot('rebuilds');

  // The quarantine, with its error.
  await page.click('#tab-quarantine');
  await loaded('quarantine');
  const quarantined = page.locator('tr.quarantine-row', { hasText: 'broken' });
  await quarantined.first().waitFor();
  check((await quarantined.textContent()).includes('NoSuchEvent'), 'the quarantine names the event it cannot read');
  await shot('quarantine');

  // The deadlines: the bank schedules none, so the view loads and says so.
  await page.click('#tab-deadlines');
  await loaded('deadlines');
  check(await page.isVisible('#deadlines-empty'), 'the deadlines view says none is pending');
  check((await page.textContent('#deadlines-summary')).includes('0 pending'), 'the deadlines view counts the backlog');

  // The look-up, reached by keyboard, and each of its answers.
  await page.focus('#tab-lookup');
  await page.keyboard.press('Enter');
  await page.waitForSelector('#view-lookup', { state: 'visible' });
  check(true, 'the look-up tab opens from the keyboard');
  async function lookUp(id, requestId) {
    await page.selectOption('#lookup-aggregate', 'account');
    await page.fill('#lookup-id', id);
    await page.fill('#lookup-request', requestId);
    await page.click('#lookup-submit');
    await loaded('lookup');
    return text('#lookup-status');
  }
  check(await lookUp('alice', 'open-alice') === 'APPENDED', 'APPENDED for the open');
  check((await text('#lookup-result')).includes('never resend'), 'APPENDED says never to resend it as a new intent');
  check(await lookUp('alice', 'w-1') === 'REJECTED', 'REJECTED for the overdraft');
  check((await text('#lookup-json')).includes('InsufficientBalance'), 'with its code');
  check(await lookUp('alice', 'never-sent') === 'NONE', 'NONE for a request never sent');
  await fault('gate', true);
  const held = command('ta', 'account', 'alice', 'deposit', { amount: 1 }, 'held-1');
  let status = '';
  for (const deadline = Date.now() + TIMEOUT; status !== 'IN_FLIGHT' && Date.now() < deadline;) {
    status = await lookUp('alice', 'held-1');
  }
  check(status === 'IN_FLIGHT', 'IN_FLIGHT while the append is held');
  await shot('lookup-in-flight');
  await fault('gate', false);
  check((await held).status === 200, 'the held deposit goes through once released');
  check(await lookUp('alice', 'held-1') === 'APPENDED', 'then APPENDED');
  await fault('reads', true);
  const unknown = await lookUp('alice', 'open-alice');
  await fault('reads', false);
  check(unknown === 'UNKNOWN', 'UNKNOWN while history cannot be asked');
  check((await text('#lookup-result')).includes('escalate'), 'UNKNOWN says to stay unknown and escalate');
  await shot('lookup-unknown');

  // The live view draws the counters while commands flow.
  await page.click('#tab-live');
  const traffic = (async () => {
    for (let i = 0; i < 40; i++) {
      await command('ta', 'account', 'alice', 'deposit', { amount: 1 }, `live-${i}`);
      await new Promise((done) => setTimeout(done, 150));
    }
  })();
  await page.waitForFunction(() => /\d/.test(document.querySelector('#live-p50')?.textContent || '')
    && /[1-9]/.test(document.querySelector('#live-total')?.textContent || ''), null, { timeout: 30000 });
  await traffic;
  check(await page.locator('svg#chart-rate path').count() > 0, 'a rate chart is drawn');
  check(await page.locator('svg#chart-latency path').count() > 0, 'a latency chart is drawn');
  check((await text('#live-p99')).endsWith('ms'), `p99 in ms (${await text('#live-p99')})`);
  await shot('live');

  // Tenant-b sees none of tenant-a's failures, nor its quarantine.
  await page.click('#sign-out');
  await signIn('tb');
  await page.click('#tab-failures');
  await page.selectOption('#filter-status', '');
  await page.fill('#filter-consumer', '');
  await page.click('#filter-apply');
  await loaded('failures');
  await page.waitForSelector('#failures-empty', { state: 'visible' });
  check(await page.locator('tr.failure-row').count() === 0, "tenant-b sees no failure of tenant-a's");
  await page.click('#tab-quarantine');
  await loaded('quarantine');
  await page.waitForSelector('#quarantine-empty', { state: 'visible' });
  check(await page.locator('tr.quarantine-row').count() === 0, "tenant-b sees no quarantine of tenant-a's");
  await page.click('#tab-lookup');
  check(await lookUp('alice', 'open-alice') === 'NONE', "tenant-b's look-up of tenant-a's request finds nothing");

  // Readable at a phone's width: nothing wider than the screen but the tables' own scroll.
  await page.setViewportSize({ width: 360, height: 740 });
  await page.click('#tab-failures');
  await loaded('failures');
  await shot('phone');
  const overflow = await page.evaluate(() => {
    const wide = [...document.querySelectorAll('body *')]
      .filter((e) => e.getBoundingClientRect().right > 362 && !e.closest('.table-wrap'))
      .map((e) => `${e.tagName.toLowerCase()}#${e.id}.${e.className}`);
    return { width: document.documentElement.scrollWidth, wide: wide.slice(0, 8) };
  });
  check(overflow.width <= 361, `no horizontal overflow at 360 px (${JSON.stringify(overflow)})`);

  check(errors.length === 0, `no script errors (${errors.join('; ')})`);
  await browser.close();
}

main().then(
  () => console.log('the operations page test passed'),
  (error) => {
    console.error(error.stack || String(error));
    process.exit(1);
  },
);
