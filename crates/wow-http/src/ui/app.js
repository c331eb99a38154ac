/* wow-rs operations page. Plain browser JS, no dependencies.
 * The page has no behaviour of its own: everything it shows comes from the service's
 * JSON API (same origin), called with the tenant's bearer token when auth is on. The page
 * itself and /metrics.json are the operator's: they load with the cookie that opening
 * /ui?token=OPERATOR_TOKEN once set (no script reads it).
 * Server data only ever reaches the page through textContent and attributes. */
(function () {
  'use strict';

  var PAGE_SIZE = 20;
  var SAMPLE_MS = 3000;
  var MAX_SAMPLES = 40;
  var TABS = ['failures', 'quarantine', 'deadlines', 'rebuilds', 'lookup', 'live'];
  var REBUILD_POLL_MS = 1000;
  var COLORS = ['#0b5cad', '#c2410c', '#1a7f37', '#8250df', '#b3261e', '#0e7490', '#9a6700', '#57606a'];
  var TOKEN_KEY = 'wow-token';

  var state = {
    authOn: false, needToken: false, token: readToken(), openapi: null, tab: null,
    cursors: [null], page: 0, lastId: null, // cursors[n] = the `after` of page n
    records: {},                            // failure records by id, as last seen
    detailId: null, detailOpener: null, specFor: null,
    samples: [], timer: null, sampling: false, rebuildTimer: null
  };

  // ---- small helpers ----
  function $(id) { return document.getElementById(id); }

  // sessionStorage may be unavailable: the token then lives in memory only.
  function readToken() { try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch (e) { return ''; } }
  function writeToken(token) {
    try { if (token) sessionStorage.setItem(TOKEN_KEY, token); else sessionStorage.removeItem(TOKEN_KEY); } catch (e) { /* memory only */ }
  }

  // Builds an element; attrs.text becomes its text, attrs.className its class, the rest attributes.
  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) {
      var value = attrs[key];
      if (value === undefined || value === null) return;
      if (key === 'text') node.textContent = String(value);
      else if (key === 'className') node.className = value;
      else node.setAttribute(key, String(value));
    });
    (children || []).forEach(function (child) { node.appendChild(child); });
    return node;
  }

  function svg(tag, attrs) {
    var node = document.createElementNS('http://www.w3.org/2000/svg', tag);
    Object.keys(attrs || {}).forEach(function (key) {
      if (key === 'text') node.textContent = String(attrs[key]);
      else node.setAttribute(key, String(attrs[key]));
    });
    return node;
  }

  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function loaded(id, yes) { $(id).setAttribute('data-loaded', yes ? 'true' : 'false'); }
  function num(v) { var n = Number(v); return isFinite(n) ? n : 0; }
  function dash(v) { return v === undefined || v === null || v === '' ? '—' : String(v); }
  function time(ms) { return typeof ms === 'number' ? new Date(ms).toLocaleString() : '—'; }
  function enc(s) { return encodeURIComponent(s); }
  function aggName(a) { a = a || {}; return dash(a.aggregateName) + '/' + dash(a.aggregateId); }
  function aggFull(a) { a = a || {}; return dash(a.contextName) + '.' + aggName(a); }
  function pretty(v) { return JSON.stringify(v, null, 2); }

  // ---- status region ----
  function showStatus(text, kind) { $('status').textContent = text; $('status').className = 'status' + (kind ? ' ' + kind : ''); }

  function errorText(res) {
    var b = res.body;
    if (b && b.errorCode) return b.errorCode + ': ' + (b.errorMsg || '');
    return 'HTTP ' + res.status + ': the service gave no error body';
  }

  function showError(res) {
    showStatus(errorText(res) + (res.status === 401 ? ' (enter a valid token above)' : ''), 'error');
  }

  function networkError(e) { showStatus('Network error: ' + (e && e.message ? e.message : e), 'error'); }

  // ---- the API ----
  // Calls the API; resolves with {status, ok, body} (body is the parsed JSON or null).
  // An operator's action passes `as`: {token, tenant}, its bearer token (else the page's)
  // and the tenant it acts in.
  function api(path, method, as, body) {
    var headers = { Accept: 'application/json' };
    var token = (as && as.token) || state.token;
    if (token) headers.Authorization = 'Bearer ' + token;
    if (as && as.tenant) headers['Command-Tenant-Id'] = as.tenant;
    var init = { method: method || 'GET', headers: headers, cache: 'no-store', credentials: 'same-origin' };
    if (body !== undefined) { headers['Content-Type'] = 'application/json'; init.body = JSON.stringify(body); }
    return fetch(path, init)
      .then(function (res) {
        return res.text().then(function (text) {
          var body = null;
          try { body = text ? JSON.parse(text) : null; } catch (e) { body = null; }
          // /metrics.json, /deadlines and /rebuilds are the operator's (the cookie): their 401
          // asks for no tenant's token.
          var operators = path === '/metrics.json' || path.indexOf('/deadlines') === 0 || path === '/rebuilds';
          if (res.status === 401 && !operators && !as) askToken();
          return { status: res.status, ok: res.ok, body: body, total: res.headers.get('Wow-Total') };
        });
      });
  }

  // ---- auth ----
  function updateAuthUi() {
    $('token-form').hidden = !(state.authOn && (!state.token || state.needToken));
    $('sign-out').hidden = !(state.authOn && state.token);
  }

  // A 401 (or no token yet): show the token form again.
  function askToken() { state.authOn = true; state.needToken = true; updateAuthUi(); }

  // With auth on and no token, a data view waits for one instead of calling.
  function blockedByAuth() {
    if (!state.authOn || state.token) return false;
    askToken();
    showStatus('Bearer auth is on: enter a token to load this view.', 'error');
    return true;
  }

  function useToken(e) {
    e.preventDefault();
    var input = $('token');
    var token = input.value.trim();
    if (!token) { showStatus('Enter a token first.', 'error'); input.focus(); return; }
    state.token = token; state.needToken = false; writeToken(token); input.value = '';
    updateAuthUi();
    showStatus('Token set.', 'ok');
    reloadCurrent();
  }

  function signOut() {
    state.token = '';
    writeToken('');
    askToken();
    clear($('failures-table').tBodies[0]);
    clear($('quarantine-table').tBodies[0]);
    clear($('deadlines-table').tBodies[0]);
    $('failure-detail').hidden = true;
    $('lookup-result').hidden = true;
    TABS.forEach(function (t) { loaded('view-' + t, false); });
    showStatus('Signed out: the token is forgotten.', 'ok');
    $('token').focus();
  }

  // ---- tabs ----
  function tabFromHash() {
    var name = location.hash.replace(/^#/, '');
    return TABS.indexOf(name) >= 0 ? name : 'failures';
  }

  function goTab(name, focus) {
    if (location.hash !== '#' + name) location.hash = name; // the hashchange selects it
    else selectTab(name);
    if (focus) $('tab-' + name).focus();
  }

  function selectTab(name) {
    state.tab = name;
    TABS.forEach(function (t) {
      var on = t === name;
      $('tab-' + t).setAttribute('aria-selected', on ? 'true' : 'false');
      $('view-' + t).hidden = !on;
    });
    var started = updateLiveTimer();
    return name === 'live' ? started : loadView(name);
  }

  function loadView(name) {
    var run = { failures: loadFailures, quarantine: loadQuarantine, deadlines: loadDeadlines, rebuilds: loadRebuilds, lookup: loadLookup, live: sample }[name];
    return run().catch(networkError);
  }

  function reloadCurrent() {
    loadView(state.tab);
    if (state.tab !== 'lookup' && !state.openapi) loadOpenapi().catch(function () {});
  }

  function tabKeys(e) {
    var i = TABS.indexOf(e.target.id.replace('tab-', ''));
    var next = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: TABS.length - 1 }[e.key];
    if (next === undefined) return;
    e.preventDefault();
    goTab(TABS[(next + TABS.length) % TABS.length], true);
  }

  // ---- failures ----
  function failureRow(r) {
    var ev = (r.eventIds && r.eventIds[0]) || '';
    var shortEv = ev.length > 12 ? ev.slice(0, 8) + '…' : ev;
    var tr = el('tr', { className: 'failure-row', 'data-id': r.id }, [
      el('td', { text: dash(r.consumer) }),
      el('td', { text: aggName(r.aggregateId), title: aggFull(r.aggregateId) }),
      el('td', { className: 'num', text: dash(r.version) }),
      el('td', { className: 'mono', text: dash(shortEv), title: ev || null }),
      el('td', { text: dash(r.errorCode) }),
      el('td', { className: 'message', text: dash(r.errorMessage), title: r.errorMessage || null }),
      el('td', { className: 'num', text: dash(r.attempts) }),
      el('td', { text: r.nextRetryAt == null ? '—' : time(r.nextRetryAt) }),
      el('td', { className: 'status s-' + r.status, text: dash(r.status) })
    ]);
    var button = el('button', { type: 'button', className: 'details-button', text: 'Details' });
    button.addEventListener('click', function () { openDetail(r.id, button); });
    tr.appendChild(el('td', {}, [button]));
    if (r.id === state.detailId) tr.classList.add('selected');
    return tr;
  }

  async function loadFailures() {
    loaded('view-failures', false);
    if (blockedByAuth()) return;
    var q = new URLSearchParams();
    var params = { status: $('filter-status').value, consumer: $('filter-consumer').value.trim(),
      aggregateId: $('filter-aggregate-id').value.trim(), recoverable: $('filter-recoverable').value,
      after: state.cursors[state.page], limit: String(PAGE_SIZE) };
    Object.keys(params).forEach(function (k) { if (params[k]) q.set(k, params[k]); });
    var res = await api('/compensation/failures?' + q.toString());
    var note = $('failures-note');
    if (res.status === 404 && res.body && res.body.errorCode === 'NotFound') {
      // The service records no consumer failures: say so instead of the table.
      note.textContent = errorText(res);
      note.hidden = false; $('failures-box').hidden = true;
      loaded('view-failures', true);
      return;
    }
    if (!res.ok || !Array.isArray(res.body)) { showError(res); return; }
    note.hidden = true; $('failures-box').hidden = false;
    var tbody = $('failures-table').tBodies[0];
    clear(tbody);
    res.body.forEach(function (r) { state.records[r.id] = r; tbody.appendChild(failureRow(r)); });
    $('failures-empty').hidden = res.body.length > 0;
    state.lastId = res.body.length ? res.body[res.body.length - 1].id : null;
    $('page-prev').disabled = state.page === 0;
    $('page-next').disabled = res.body.length < PAGE_SIZE;
    $('page-number').textContent = 'Page ' + (state.page + 1);
    $('failures-total').textContent = res.total == null ? '' : res.total + ' matching in all';
    await loadParked();
    loaded('view-failures', true);
  }

  // The lanes of parked streams (SPEC DS-5), oldest first.
  async function loadParked() {
    var res = await api('/compensation/parked');
    if (!res.ok || !Array.isArray(res.body)) return;
    var tbody = $('parked-table').tBodies[0];
    clear(tbody);
    res.body.forEach(function (lane) {
      tbody.appendChild(el('tr', { className: 'parked-row' }, [
        el('td', { text: dash(lane.consumer) }),
        el('td', { text: aggName(lane.aggregateId), title: aggFull(lane.aggregateId) }),
        el('td', { className: 'num', text: dash(lane.headVersion) }),
        el('td', { className: 'num', text: dash(lane.parkedThrough) }),
        el('td', { className: 'num', text: dash(lane.parked) }),
        el('td', { text: time(lane.since) })
      ]));
    });
    $('parked-empty').hidden = res.body.length > 0;
  }

  // Paging: page n asks for the records after the last id of page n-1.
  function filterFailures(e) {
    e.preventDefault();
    state.cursors = [null]; state.page = 0;
    loadFailures().catch(networkError);
  }
  function nextPage() {
    if (!state.lastId) return;
    state.cursors[state.page + 1] = state.lastId; state.page += 1;
    loadFailures().catch(networkError);
  }
  function prevPage() {
    if (state.page === 0) return;
    state.page -= 1;
    loadFailures().catch(networkError);
  }

  // Fills the detail panel's fields from a record.
  function renderDetail(r) {
    if (!r) return;
    $('detail-title').textContent = 'Failure of ' + dash(r.consumer) + ' on ' + aggName(r.aggregateId);
    $('detail-status').textContent = dash(r.status);
    $('detail-status').className = 'status-word s-' + r.status;
    var a = r.aggregateId || {};
    var fields = [
      ['Id', r.id], ['Consumer', r.consumer], ['Stage', r.stage],
      ['Aggregate', aggFull(a)], ['Tenant', a.tenantId], ['Version', r.version],
      ['Stream', r.streamId], ['Events', (r.eventIds || []).join(', ')],
      ['Error code', r.errorCode], ['Error message', r.errorMessage], ['Attempts', r.attempts],
      ['Next retry', r.nextRetryAt == null ? '—' : time(r.nextRetryAt)],
      ['Created', time(r.createdAt)], ['Updated', time(r.updatedAt)]
    ];
    var open = r.status === 'FAILED' || r.status === 'EXHAUSTED';
    $('skip-box').hidden = !open;
    $('recoverable-box').hidden = !open;
    fields.push(['Recoverable', r.recoverable]);
    var spec = r.retrySpec;
    fields.push(['Retry spec', spec ? spec.maxAttempts + ' attempts, waits ' + spec.initialBackoffMs + '–' + spec.maxBackoffMs + ' ms' : 'the service\'s']);
    if (r.updatedBy) fields.push(['Updated by', r.updatedBy]);
    if (r.skippedBy) fields.push(['Skipped by', r.skippedBy]);
    if (state.specFor !== r.id) {
      // The form starts from the record's spec (empty for the service's); kept while editing.
      state.specFor = r.id;
      $('spec-max-attempts').value = spec ? spec.maxAttempts : '';
      $('spec-initial-backoff').value = spec ? spec.initialBackoffMs : '';
      $('spec-max-backoff').value = spec ? spec.maxBackoffMs : '';
    }
    var dl = $('detail-fields');
    clear(dl);
    fields.forEach(function (f) { dl.appendChild(el('dt', { text: f[0] })); dl.appendChild(el('dd', { text: dash(f[1]) })); });
  }

  function markSelected() {
    var rows = $('failures-table').tBodies[0].rows;
    for (var i = 0; i < rows.length; i++) {
      rows[i].classList.toggle('selected', rows[i].getAttribute('data-id') === state.detailId);
    }
  }

  async function openDetail(id, opener) {
    state.detailId = id; state.detailOpener = opener;
    $('failure-detail').hidden = false;
    loaded('failure-detail', false);
    markSelected();
    renderDetail(state.records[id]);
    $('detail-events').textContent = 'Loading…';
    $('detail-title').focus();
    try {
      var res = await api('/compensation/failures/' + enc(id));
      if (state.detailId !== id) return; // another row was opened meanwhile
      if (!res.ok || !res.body || !res.body.failure) { $('detail-events').textContent = ''; showError(res); return; }
      state.records[id] = res.body.failure;
      renderDetail(res.body.failure);
      $('detail-events').textContent = pretty(res.body.events || []);
      loaded('failure-detail', true);
    } catch (e) { networkError(e); }
  }

  function closeDetail() {
    $('failure-detail').hidden = true;
    state.detailId = null; state.specFor = null;
    markSelected();
    var opener = state.detailOpener;
    if (opener && document.body.contains(opener)) opener.focus();
    state.detailOpener = null;
  }

  // Replaces the table row of a record with a fresh one, if it is on this page.
  function replaceRow(id, r) {
    var rows = $('failures-table').tBodies[0].rows;
    for (var i = 0; i < rows.length; i++) {
      if (rows[i].getAttribute('data-id') !== id) continue;
      var row = failureRow(r);
      rows[i].parentNode.replaceChild(row, rows[i]);
      if (state.detailId === id) state.detailOpener = row.querySelector('.details-button');
      return;
    }
  }

  async function retryNow() {
    var id = state.detailId;
    if (!id) return;
    var button = $('retry-now');
    button.disabled = true;
    showStatus('Retrying…');
    try {
      var res = await api('/compensation/failures/' + enc(id) + '/retry', 'POST');
      if (!res.ok || !res.body || !res.body.status) { showError(res); return; }
      var r = res.body;
      state.records[id] = r;
      if (state.detailId === id) renderDetail(r);
      replaceRow(id, r);
      var ok = r.status === 'SUCCEEDED';
      showStatus('Retried: ' + r.status + (ok ? '' : ' (' + dash(r.errorCode) + ': ' + dash(r.errorMessage) + ')'), ok ? 'ok' : 'error');
    } catch (e) { networkError(e); } finally { button.disabled = false; }
  }

  // An operator gives up on the failed stream (SPEC DS-5): recorded, never retried, and the
  // streams parked behind it run. Needs the operator's bearer token.
  async function skipNow() {
    var id = state.detailId;
    if (!id) return;
    var button = $('skip-now');
    button.disabled = true;
    showStatus('Skipping…');
    try {
      var record = state.records[id] || {};
      var as = { token: $('skip-token').value, tenant: record.aggregateId && record.aggregateId.tenantId };
      var res = await api('/compensation/failures/' + enc(id) + '/skip', 'POST', as);
      if (!res.ok || !res.body || !res.body.status) { showError(res); return; }
      state.records[id] = res.body;
      if (state.detailId === id) renderDetail(res.body);
      replaceRow(id, res.body);
      showStatus('Skipped by ' + dash(res.body.skippedBy) + ': the streams parked behind it run.', 'ok');
      await loadParked();
    } catch (e) { networkError(e); } finally { button.disabled = false; }
  }

  // An operator's edit of the open record (PUT .../{what} with `body`), with the operator's
  // bearer token in the tenant of the record; the record after it replaces the one shown.
  async function editRecord(what, body, button, done) {
    var id = state.detailId;
    if (!id) return;
    button.disabled = true;
    showStatus('Saving…');
    try {
      var record = state.records[id] || {};
      var as = { token: $('skip-token').value, tenant: record.aggregateId && record.aggregateId.tenantId };
      var res = await api('/compensation/failures/' + enc(id) + '/' + what, 'PUT', as, body);
      if (!res.ok || !res.body || !res.body.status) { showError(res); return; }
      state.records[id] = res.body;
      if (state.detailId === id) renderDetail(res.body);
      replaceRow(id, res.body);
      showStatus(done(res.body), 'ok');
    } catch (e) { networkError(e); } finally { button.disabled = false; }
  }

  function markRecoverable(kind, button) {
    editRecord('recoverable', { recoverable: kind }, button, function (r) {
      return 'Marked ' + dash(r.recoverable) + ' by ' + dash(r.updatedBy) + '.';
    });
  }

  function saveRetrySpec(e) {
    e.preventDefault();
    var body = { maxAttempts: Number($('spec-max-attempts').value),
      initialBackoffMs: Number($('spec-initial-backoff').value), maxBackoffMs: Number($('spec-max-backoff').value) };
    editRecord('retry-spec', body, $('spec-save'), function (r) {
      return 'Retry spec set by ' + dash(r.updatedBy) + ': ' + dash(r.status) +
        (r.nextRetryAt == null ? '' : ', next retry ' + time(r.nextRetryAt)) + '.';
    });
  }

  // ---- rebuilds ----
  function rebuildRow(view, r, busy) {
    r = r || {};
    var left = r.etaMs == null ? '—' : (r.etaMs / 1000).toFixed(1) + ' s';
    var button = el('button', { type: 'button', className: 'rebuild-button', text: 'Rebuild', 'data-view': view });
    button.disabled = busy;
    button.addEventListener('click', function () { startRebuild(view, button); });
    return el('tr', { className: 'rebuild-row', 'data-view': view }, [
      el('td', { text: view }),
      el('td', { className: r.state ? 'status s-' + r.state : '' }, [
        el('span', { text: dash(r.state) }),
        el('div', { className: 'note rebuild-error', text: r.error || '' })
      ]),
      el('td', { className: 'num', text: dash(r.generation) }),
      el('td', { className: 'num', text: r.state ? dash(r.aggregatesDone) + ' / ' + dash(r.aggregatesTotal) : '—' }),
      el('td', { className: 'num', text: dash(r.streams) }),
      el('td', { text: left }),
      el('td', {}, [button])
    ]);
  }

  async function loadRebuilds() {
    loaded('view-rebuilds', false);
    clearTimeout(state.rebuildTimer);
    var res = await api('/rebuilds');
    if (res.status === 401 || res.status === 403) {
      showStatus('The rebuilds are the operator\'s: open /ui?token=OPERATOR_TOKEN again to sign this browser in.', 'error');
      return;
    }
    var body = res.body;
    if (!res.ok || !body || !Array.isArray(body.views)) { showError(res); return; }
    var last = {};
    (body.rebuilds || []).forEach(function (r) { last[r.view] = r; });
    var tbody = $('rebuilds-table').tBodies[0];
    clear(tbody);
    var running = false;
    body.views.forEach(function (view) {
      var r = last[view];
      var busy = !!r && (r.state === 'ANNOUNCED' || r.state === 'RUNNING');
      running = running || busy;
      tbody.appendChild(rebuildRow(view, r, busy));
    });
    $('rebuilds-empty').hidden = body.views.length > 0;
    if (running && state.tab === 'rebuilds') {
      state.rebuildTimer = setTimeout(function () { loadRebuilds().catch(networkError); }, REBUILD_POLL_MS);
    }
    loaded('view-rebuilds', true);
  }

  async function startRebuild(view, button) {
    button.disabled = true;
    showStatus('Starting the rebuild of ' + view + '…');
    try {
      var res = await api('/rebuilds/' + enc(view), 'POST', { token: $('rebuild-token').value });
      if (!res.ok) { showError(res); button.disabled = false; return; }
      showStatus('Rebuilding ' + view + ' into generation ' + dash(res.body && res.body.generation) + ': readers read the current one until it has caught up.', 'ok');
      await loadRebuilds();
    } catch (e) { networkError(e); button.disabled = false; }
  }

  // ---- quarantine ----
  async function loadQuarantine() {
    loaded('view-quarantine', false);
    if (blockedByAuth()) return;
    var res = await api('/health');
    var details = res.body && res.body.details;
    if (!details) { showError(res); return; }
    var list = Array.isArray(details.quarantined) ? details.quarantined : [];
    var tbody = $('quarantine-table').tBodies[0];
    clear(tbody);
    list.forEach(function (q) {
      // A quarantined aggregate carries its identity flat: {contextName, aggregateName, aggregateId, tenantId, ...}.
      var a = q;
      tbody.appendChild(el('tr', { className: 'quarantine-row' }, [
        el('td', { text: aggName(a), title: aggFull(a) }),
        el('td', { text: dash(a.tenantId) }),
        el('td', { className: 'num', text: dash(q.version) }),
        el('td', { className: 'message', text: dash(q.message), title: q.message || null }),
        el('td', { text: time(q.since) })
      ]));
    });
    $('quarantine-empty').hidden = list.length > 0;
    loaded('view-quarantine', true);
  }

  // ---- deadlines ----
  async function loadDeadlines() {
    loaded('view-deadlines', false);
    var res = await api('/deadlines?limit=100');
    if (res.status === 401 || res.status === 403) {
      showStatus('The deadlines are the operator\'s: open /ui?token=OPERATOR_TOKEN again to sign this browser in.', 'error');
      return;
    }
    var body = res.body;
    if (!res.ok || !body || !Array.isArray(body.earliest)) { showError(res); return; }
    var tbody = $('deadlines-table').tBodies[0];
    clear(tbody);
    body.earliest.forEach(function (d) {
      tbody.appendChild(el('tr', { className: 'deadline-row' }, [
        el('td', { text: time(d.dueAt) }),
        el('td', { text: aggName(d.owner), title: aggFull(d.owner) }),
        el('td', { text: dash(d.owner && d.owner.tenantId) }),
        el('td', { text: dash(d.name) }),
        el('td', { text: aggName(d.target) + ' ' + dash(d.command), title: pretty(d.body) }),
        el('td', { className: 'mono', text: dash(d.requestId) })
      ]));
    });
    $('deadlines-summary').textContent = num(body.pending) + ' pending' +
      (body.nextDueAt == null ? '' : ', next due ' + time(body.nextDueAt));
    $('deadlines-empty').hidden = body.earliest.length > 0;
    loaded('view-deadlines', true);
  }

  // ---- look-up ----
  var EXPLAIN = {
    APPENDED: function (b) { return 'Appended at version ' + dash(b.version) + ': never resend it as a new intent.'; },
    REJECTED: function (b) { return 'Rejected with ' + dash(b.errorCode) + ': a resend gets the same answer.'; },
    IN_FLIGHT: function () { return 'A node holds it and has not decided: wait and look again.'; },
    NONE: function () { return 'No decision recorded: resending with the same request id is safe.'; },
    UNKNOWN: function () { return 'History cannot be asked now: stay unknown and escalate; never resend under a new request id.'; }
  };

  async function loadOpenapi() {
    var res = await api('/openapi.json');
    if (res.ok && res.body) {
      state.openapi = res.body;
      var schemes = (res.body.components || {}).securitySchemes || {};
      state.authOn = !!schemes.bearer;
    } else if (res.status !== 401) {
      showError(res);
    }
    return res;
  }

  async function loadLookup() {
    loaded('view-lookup', false);
    if (!state.openapi) await loadOpenapi();
    var select = $('lookup-aggregate');
    var current = select.value;
    var seen = {};
    clear(select);
    ((state.openapi && state.openapi.tags) || []).forEach(function (tag) {
      var name = String(tag && tag.name || '');
      var dot = name.lastIndexOf('.'); // tags are context.aggregate
      var aggregate = dot >= 0 ? name.slice(dot + 1) : name;
      if (!aggregate || seen[aggregate]) return;
      seen[aggregate] = true;
      select.appendChild(el('option', { value: aggregate, text: aggregate, title: name }));
    });
    if (!select.options.length) select.appendChild(el('option', { value: '', text: 'no aggregates' }));
    if (seen[current]) select.value = current;
    loaded('view-lookup', true);
  }

  async function lookUp(e) {
    e.preventDefault();
    var aggregate = $('lookup-aggregate').value;
    var id = $('lookup-id').value;
    var request = $('lookup-request').value;
    if (!aggregate || !id || !request) { showStatus('Choose an aggregate and fill in both ids.', 'error'); return; }
    if (blockedByAuth()) return;
    loaded('view-lookup', false);
    var button = $('lookup-submit');
    button.disabled = true;
    try {
      var res = await api('/' + enc(aggregate) + '/' + enc(id) + '/requests/' + enc(request));
      var b = res.body || {};
      var word, explain;
      if (EXPLAIN[b.status]) { word = b.status; explain = EXPLAIN[word](b); }
      else if (b.errorCode) { word = b.errorCode; explain = b.errorMsg || ''; }
      else { word = 'HTTP ' + res.status; explain = 'The service answered without a JSON body.'; }
      var st = $('lookup-status');
      st.textContent = word;
      st.className = 'big-status s-' + word;
      $('lookup-explain').textContent = explain;
      $('lookup-json').textContent = res.body === null ? '' : pretty(res.body);
      $('lookup-result').hidden = false;
      if (res.status === 401) showError(res); else showStatus('Looked up: ' + word);
      loaded('view-lookup', true);
    } catch (err) { networkError(err); } finally { button.disabled = false; }
  }

  // ---- live ----
  // Samples only while the Live tab is selected and the page is visible; resolves after the first sample.
  function updateLiveTimer() {
    var want = state.tab === 'live' && !document.hidden;
    if (want && !state.timer) {
      loaded('view-live', false);
      state.timer = setInterval(sample, SAMPLE_MS);
      return sample();
    }
    if (!want && state.timer) { clearInterval(state.timer); state.timer = null; }
    return Promise.resolve();
  }

  // One /metrics.json answer, reduced to what the charts need.
  function toSample(m) {
    var commands = {};
    (Array.isArray(m.commands) ? m.commands : []).forEach(function (c) {
      var key = dash(c.stage) + ' ' + dash(c.errorCode);
      commands[key] = (commands[key] || 0) + num(c.count);
    });
    var lat = m.latency || {};
    var buckets = (Array.isArray(lat.buckets) ? lat.buckets : [])
      .map(function (b) { return { le: num(b.le), count: num(b.count) }; })
      .sort(function (x, y) { return x.le - y.le; });
    return { t: Date.now(), commands: commands, buckets: buckets, count: num(lat.count),
      backlog: m.eventBacklog, quarantined: m.quarantined,
      lag: Array.isArray(m.consumerLag) ? m.consumerLag : [] };
  }

  // Each consumer's lag (SPEC DS-6): one row per consumer.
  function drawLag(lag) {
    var body = $('live-lag').querySelector('tbody');
    body.textContent = '';
    lag.forEach(function (c) {
      var tr = document.createElement('tr');
      [c.consumer, c.streamsBehind, c.parkedStreams, c.failuresWaiting,
        num(c.oldestUnhandledMs) > 0 ? (num(c.oldestUnhandledMs) / 1000).toFixed(1) + ' s' : '—']
        .forEach(function (v) {
          var td = document.createElement('td');
          td.textContent = dash(v);
          tr.appendChild(td);
        });
      body.appendChild(tr);
    });
  }

  // Estimates a quantile (seconds) from cumulative bucket counts, interpolating inside a bucket.
  function quantile(q, cum, total) {
    if (!(total > 0)) return null;
    var rank = q * total, lower = 0, below = 0;
    for (var i = 0; i < cum.length; i++) {
      if (cum[i].n >= rank) {
        var inside = cum[i].n - below;
        return lower + (cum[i].le - lower) * (inside > 0 ? (rank - below) / inside : 1);
      }
      lower = cum[i].le;
      below = cum[i].n;
    }
    return cum.length ? cum[cum.length - 1].le : null; // beyond the last finite bound
  }

  // The rates and percentiles between two samples (counters that went back count as 0).
  function interval(prev, cur) {
    var dt = Math.max(0.001, (cur.t - prev.t) / 1000);
    var rates = {}, total = 0;
    Object.keys(cur.commands).forEach(function (k) {
      var r = Math.max(0, cur.commands[k] - (prev.commands[k] || 0)) / dt;
      rates[k] = r;
      total += r;
    });
    var before = {};
    prev.buckets.forEach(function (b) { before[b.le] = b.count; });
    var running = 0;
    var cum = cur.buckets.map(function (b) {
      running = Math.max(running, b.count - (before[b.le] || 0));
      return { le: b.le, n: running };
    });
    var n = Math.max(cur.count - prev.count, running);
    function ms(q) { var s = quantile(q, cum, n); return s === null ? null : s * 1000; }
    return { rates: rates, total: total, p50: ms(0.5), p90: ms(0.9), p99: ms(0.99) };
  }

  function fmtRate(v) { return (v >= 100 ? v.toFixed(0) : v.toFixed(1)) + ' /s'; }
  function fmtMs(v) {
    if (v === null || v === undefined) return '—';
    return (v >= 100 ? v.toFixed(0) : v >= 1 ? v.toFixed(1) : v.toFixed(2)) + ' ms';
  }

  async function sample() {
    if (state.sampling) return;
    state.sampling = true;
    try {
      var res = await api('/metrics.json');
      if (res.status === 401 || res.status === 403) {
        showStatus('The live view is the operator\'s: open /ui?token=OPERATOR_TOKEN again to sign this browser in.', 'error');
        return;
      }
      if (!res.ok || !res.body || typeof res.body !== 'object') { showError(res); return; }
      state.samples.push(toSample(res.body));
      if (state.samples.length > MAX_SAMPLES) state.samples.shift();
      renderLive();
      loaded('view-live', true);
    } catch (e) { networkError(e); } finally { state.sampling = false; }
  }

  function renderLive() {
    var s = state.samples;
    var last = s[s.length - 1];
    var intervals = [];
    for (var i = 1; i < s.length; i++) intervals.push(interval(s[i - 1], s[i]));
    var cur = intervals[intervals.length - 1];
    $('live-total').textContent = fmtRate(cur ? cur.total : 0);
    $('live-p50').textContent = fmtMs(cur && cur.p50);
    $('live-p90').textContent = fmtMs(cur && cur.p90);
    $('live-p99').textContent = fmtMs(cur && cur.p99);
    $('live-backlog').textContent = dash(last.backlog);
    $('live-quarantined').textContent = dash(last.quarantined);
    drawLag(last.lag || []);

    var keys = {};
    s.forEach(function (x) { Object.keys(x.commands).forEach(function (k) { keys[k] = true; }); });
    var rateSeries = Object.keys(keys).sort().map(function (k, j) {
      return { name: k, color: COLORS[j % COLORS.length], none: 0,
        values: intervals.map(function (iv) { return iv.rates[k] || 0; }) };
    });
    drawChart($('chart-rate'), rateSeries, fmtRate, 'No commands counted yet.');
    var latSeries = ['p50', 'p90', 'p99'].map(function (p, j) {
      return { name: p, color: COLORS[j], none: null, values: intervals.map(function (iv) { return iv[p]; }) };
    });
    drawChart($('chart-latency'), latSeries, fmtMs, '');
  }

  function niceMax(v) {
    var m = Math.pow(10, Math.floor(Math.log10(v)));
    var steps = [1, 2, 5, 10];
    for (var i = 0; i < steps.length; i++) if (steps[i] * m >= v) return steps[i] * m;
    return 10 * m;
  }

  // Draws line series into an <svg>, with a legend of each series' current value below.
  // values[i] may be null (no data: a gap); with fewer than two values the line is flat.
  function drawChart(node, series, fmt, emptyText) {
    clear(node);
    var W = 360, left = 48, right = 10, top = 10, ph = 100, row = 15;
    var legendTop = top + ph + 18;
    var H = legendTop + Math.max(1, series.length) * row + 4;
    node.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
    var n = 0, max = 0;
    series.forEach(function (sr) {
      n = Math.max(n, sr.values.length);
      sr.values.forEach(function (v) { if (v !== null && v > max) max = v; });
    });
    max = max > 0 ? niceMax(max) : 1;
    function x(i) { return left + (n > 1 ? i * (W - left - right) / (n - 1) : 0); }
    function y(v) { return top + ph - (v / max) * ph; }

    [0, max / 2, max].forEach(function (v) { // grid and y labels
      node.appendChild(svg('line', { x1: left, x2: W - right, y1: y(v), y2: y(v), 'class': 'grid' }));
      node.appendChild(svg('text', { x: left - 4, y: y(v) + 3, 'text-anchor': 'end', text: fmt(v) }));
    });

    series.forEach(function (sr, j) {
      var d = '';
      var known = sr.values.filter(function (v) { return v !== null; });
      if (n < 2 || !known.length) { // one value or none known: a flat line across
        var v = known.length ? known[0] : 0;
        d = 'M' + left + ' ' + y(v) + 'L' + (W - right) + ' ' + y(v);
      } else {
        var pen = 'M';
        sr.values.forEach(function (v, i) {
          if (v === null) { pen = 'M'; return; }
          d += pen + x(i).toFixed(1) + ' ' + y(v).toFixed(1);
          pen = 'L';
        });
      }
      if (d) node.appendChild(svg('path', { d: d, fill: 'none', stroke: sr.color, 'stroke-width': 1.8 }));

      var current = null; // the last value that is known
      for (var k = sr.values.length - 1; k >= 0 && current === null; k--) current = sr.values[k];
      var ly = legendTop + j * row;
      node.appendChild(svg('rect', { x: left, y: ly - 8, width: 10, height: 10, fill: sr.color }));
      node.appendChild(svg('text', { x: left + 16, y: ly, 'class': 'legend',
        text: sr.name + ' ' + fmt(current === null ? sr.none : current) }));
    });
    if (!series.length && emptyText) {
      node.appendChild(svg('text', { x: left, y: legendTop, 'class': 'legend', text: emptyText }));
    }
  }

  // ---- start ----
  function bind() {
    TABS.forEach(function (t) {
      var tab = $('tab-' + t);
      tab.addEventListener('click', function () { goTab(t, false); });
      tab.addEventListener('keydown', tabKeys);
    });
    window.addEventListener('hashchange', function () { selectTab(tabFromHash()); });
    document.addEventListener('visibilitychange', function () { updateLiveTimer(); });
    $('token-form').addEventListener('submit', useToken);
    $('sign-out').addEventListener('click', signOut);
    $('failures-filter').addEventListener('submit', filterFailures);
    $('refresh-failures').addEventListener('click', function () { loadFailures().catch(networkError); });
    $('page-next').addEventListener('click', nextPage);
    $('page-prev').addEventListener('click', prevPage);
    $('detail-close').addEventListener('click', closeDetail);
    $('failure-detail').addEventListener('keydown', function (e) { if (e.key === 'Escape') closeDetail(); });
    $('retry-now').addEventListener('click', retryNow);
    $('skip-now').addEventListener('click', skipNow);
    $('mark-recoverable').addEventListener('click', function () { markRecoverable('RECOVERABLE', $('mark-recoverable')); });
    $('mark-unrecoverable').addEventListener('click', function () { markRecoverable('UNRECOVERABLE', $('mark-unrecoverable')); });
    $('retry-spec-form').addEventListener('submit', saveRetrySpec);
    $('refresh-rebuilds').addEventListener('click', function () { loadRebuilds().catch(networkError); });
    $('refresh-quarantine').addEventListener('click', function () { loadQuarantine().catch(networkError); });
    $('refresh-deadlines').addEventListener('click', function () { loadDeadlines().catch(networkError); });
    $('lookup-form').addEventListener('submit', lookUp);
  }

  async function init() {
    bind();
    try {
      var res = await loadOpenapi(); // detects auth: components.securitySchemes.bearer
      if (res.status === 401) state.authOn = true;
    } catch (e) { networkError(e); }
    if (state.authOn && !state.token) state.needToken = true;
    updateAuthUi();
    try { await selectTab(tabFromHash()); } catch (e) { networkError(e); }
    document.body.setAttribute('data-ready', 'true');
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();
})();
