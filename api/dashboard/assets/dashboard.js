// Prescient's dashboard: asks for a token, keeps it in sessionStorage (so a
// reload keeps the session, a new tab or a closed browser does not), and
// shows what the JSON API under /v1 answers. Every error is shown where it
// happened; a 401 goes back to the login form with the server's message.
// The panels live in their own modules: jobs.js (listing, filters, detail,
// cancel), fleet.js, whatif.js, models.js (models and mode); core.js holds
// the API client and the helpers they share.

import {
  $, api, APIError, el, table, list, hooks, session, TOKEN_KEY, describeError, showSectionError, setupConfirm,
  fmtDuration, fmtTime, fmtNum, fmtForecast, parseLabels,
} from './core.js';
import { fetchJobs, renderJobs, setupJobs, resetJobs, refreshDetail, noteTenants, openJob } from './jobs.js';
import { renderFleet, setupFleet } from './fleet.js';
import { noteNodes, noteRole, setupWhatIf } from './whatif.js';
import { renderModels, renderMode, setupModels } from './models.js';

const REFRESH_MS = 5000;

let timer = null;
let generation = 0; // bumped at login and logout so that late answers of an old session are dropped
let lastFleet = null;

function showBanner(messages) {
  const b = $('#error');
  b.replaceChildren(...messages.map((m) => el('div', {}, m)));
  b.hidden = messages.length === 0;
}

// ---- login --------------------------------------------------------------

function showLogin(message) {
  stopRefresh();
  generation++;
  session.identity = null;
  resetJobs();
  const confirm = $('#confirm-dialog');
  if (confirm.open) confirm.close(); // its question is answered no
  // What the last session did is not the next one's business.
  for (const s of ['#submit-result', '#jobs-error', '#mode-result']) $(s).hidden = true;
  $('#whatif-result').replaceChildren();
  $('#whatif-tenants').value = ''; // the last session's tenants are not the next one's
  $('#app').hidden = true;
  $('#nav').hidden = true;
  $('#logout').hidden = true;
  $('#mode').hidden = true;
  $('#whoami').hidden = true;
  $('#window-label').hidden = true;
  $('#refreshed').textContent = '';
  showBanner([]);
  $('#login').hidden = false;
  const e = $('#login-error');
  e.textContent = message || '';
  e.hidden = !message;
  $('#token').focus();
}

// login tries token: GET /v1/whoami proves it and says its tenant and role.
async function login(token) {
  sessionStorage.setItem(TOKEN_KEY, token);
  const btn = $('#login-submit');
  btn.disabled = true;
  let who;
  try {
    who = await api('GET', '/v1/whoami', undefined, { login: true });
  } catch (err) {
    if (err.status === 401 || err.status === 403) sessionStorage.removeItem(TOKEN_KEY);
    const why = err.status === 401 ? 'The API did not accept this token. ' : '';
    showLogin(why + describeError(err));
    return;
  } finally {
    btn.disabled = false;
  }
  showApp(who);
}

function logout() {
  sessionStorage.removeItem(TOKEN_KEY);
  showLogin('');
}

// showApp shows the dashboard for identity who (read again after a
// reload, when the token comes from the session).
async function showApp(who) {
  generation++;
  const gen = generation;
  $('#login').hidden = true;
  $('#app').hidden = false;
  $('#nav').hidden = false;
  $('#logout').hidden = false;
  $('#window-label').hidden = false;
  if (!who) {
    try {
      who = await api('GET', '/v1/whoami');
    } catch (err) {
      if (gen !== generation) return; // a 401 ended the session
      showBanner([describeError(err)]);
    }
  }
  if (gen !== generation) return;
  setIdentity(who || null);
  await refresh();
}

function setIdentity(who) {
  session.identity = who;
  const w = $('#whoami');
  w.hidden = !who;
  w.textContent = who ? `${who.role} · tenant ${who.tenant}` : '';
  noteRole();
}

// ---- refresh ------------------------------------------------------------

function stopRefresh() {
  if (timer !== null) clearTimeout(timer);
  timer = null;
}

let latest = 0; // the newest refresh: an older one that ends later is dropped

async function refresh() {
  stopRefresh();
  const gen = generation;
  const mine = ++latest;
  const parts = [
    ['fleet', () => api('GET', '/v1/fleet'), renderFleetAndMode],
    ['stats', () => api('GET', '/v1/stats?window_s=' + encodeURIComponent($('#window').value)), renderStats],
    ['jobs', fetchJobs, renderJobs],
    ['recommendations', () => api('GET', '/v1/recommendations?limit=50'), (d) => renderRecommendations(list(d, 'recommendations'))],
    // A fleet with no GPU up answers 404: an empty panel, not an error.
    ['idle', () => api('GET', '/v1/forecasts/idle?horizon_s=7200&step_s=900')
      .catch((e) => { if (e instanceof APIError && e.status === 404) return null; throw e; }), renderIdle],
    ['models', () => api('GET', '/v1/models'), renderModels],
  ];
  const results = await Promise.allSettled(parts.map(([, fetchIt]) => fetchIt()));
  if (gen !== generation || mine !== latest) return;
  const errors = [];
  for (let i = 0; i < parts.length; i++) {
    const [key, , render] = parts[i];
    const r = results[i];
    if (r.status === 'rejected') {
      const err = r.reason instanceof APIError ? r.reason : new APIError(-1, 'client', String(r.reason), key);
      showSectionError(key, err);
      errors.push(err.describe());
      continue;
    }
    try {
      render(r.value);
      showSectionError(key, null);
    } catch (e) {
      // A bug here, or an answer of an unexpected shape: say so rather than show stale figures.
      const err = new APIError(-1, 'render', `cannot show the answer: ${e.message}`, key);
      showSectionError(key, err);
      errors.push(err.describe());
    }
  }
  showBanner(errors);
  refreshDetail();
  $('#refreshed').textContent = 'updated ' + new Date().toISOString().slice(11, 19) + ' UTC';
  timer = setTimeout(refresh, REFRESH_MS);
}

// ---- sections -----------------------------------------------------------

function renderFleetAndMode(f) {
  lastFleet = f;
  const mode = $('#mode');
  mode.textContent = f.mode || '';
  mode.hidden = !f.mode;
  renderMode(f.mode);
  const nodes = f.nodes || [];
  let utilSum = 0, utilN = 0, powerW = 0;
  for (const n of nodes) for (const g of n.gpus || []) {
    if (Number.isFinite(g.utilization_pct)) { utilSum += g.utilization_pct; utilN++; }
    if (Number.isFinite(g.power_w)) powerW += g.power_w;
  }
  $('#summary').replaceChildren(
    card('GPUs', `${f.gpus}`, `${fmtNum(f.gpus_busy)} allocated · ${nodes.length} nodes`, 'summary-gpus'),
    card('Utilization now', utilN ? `${fmtNum(utilSum / utilN)} %` : '–', utilN ? `mean of ${utilN} GPUs` : 'no recent telemetry', 'summary-util'),
    card('Power now', utilN ? `${fmtNum(powerW / 1000, 2)} kW` : '–', '', 'summary-power'),
    card('Queued', `${f.queued}`, '', 'summary-queued'),
    card('Running', `${f.running}`, '', 'summary-running'),
  );
  renderFleet(f);
  noteNodes(nodes.map((n) => n.name));
}

function card(title, value, sub, id) {
  return el('div', { class: 'card', id }, el('div', { class: 'card-title' }, title), el('div', { class: 'card-value' }, value),
    sub ? el('div', { class: 'muted' }, sub) : null);
}

function renderStats(s) {
  const series = s.series || [];
  Charts.line($('#util-chart'), [
    { name: 'utilization %', cls: 'util', unit: '%', values: series.map((p) => ({ t: p.time, v: p.utilization_pct })) },
  ], { max: 100, unit: '%' });
  Charts.line($('#power-chart'), [
    { name: 'power kW', cls: 'power', unit: ' kW', values: series.map((p) => ({ t: p.time, v: p.power_w / 1000 })) },
  ], { unit: 'kW' });

  const waitRows = (rows) => (rows || []).map((w) => ({
    label: w.key, value: w.mean_s / 60, marker: w.p90_s / 60,
    text: `${fmtDuration(w.mean_s)} (P90 ${fmtDuration(w.p90_s)})`,
    title: `${w.key}: ${w.jobs} jobs, mean ${fmtDuration(w.mean_s)}, P90 ${fmtDuration(w.p90_s)}`,
  }));
  Charts.bars($('#wait-tier'), waitRows(s.wait_by_tier), { emptyText: 'No job started in this window.' });
  Charts.bars($('#wait-tenant'), waitRows(s.wait_by_tenant), { emptyText: 'No job started in this window.' });
  noteTenants((s.wait_by_tenant || []).map((w) => w.key));

  const failures = s.failures || [];
  $('#outcomes').replaceChildren(
    el('p', {}, el('span', { id: 'completed', class: 'big ok' }, String(s.completed || 0)), ' completed · ',
      el('span', { id: 'failed', class: 'big bad' }, String(s.failed || 0)), ' failed ',
      el('span', { class: 'muted' }, `(${fmtTime(s.from)} to ${fmtTime(s.until)})`)),
    failures.length ? table(['Failure reason', 'Jobs'], failures.map((f) =>
      el('tr', {}, el('td', {}, f.reason || '(none given)'), el('td', { class: 'num' }, String(f.count)))), { id: 'failures' })
      : el('p', { class: 'muted' }, 'No failures in this window.'));

  const quotas = s.quotas || [];
  const limit = (n) => (n === undefined || n === null ? '—' : String(n));
  $('#quotas').replaceChildren(quotas.length
    ? table(['Tenant', 'Cohort', 'GPU model', 'Held / quota', 'Borrowed', 'Borrowing limit', 'Lending limit'], quotas.map((q) =>
      el('tr', { 'data-quota': `${q.tenant}/${q.model}`, class: q.held_gpus > q.nominal_gpus ? 'borrowing' : '' },
        el('td', {}, q.tenant), el('td', {}, q.cohort || '—'), el('td', {}, q.model || 'any'),
        el('td', { class: 'num' }, `${q.held_gpus} / ${q.nominal_gpus}`), el('td', { class: 'num' }, String(q.borrowed_gpus)),
        el('td', { class: 'num' }, limit(q.borrowing_limit_gpus)), el('td', { class: 'num' }, limit(q.lending_limit_gpus)))), { id: 'quota-table' })
    : el('p', { class: 'muted' }, 'No tenant has a quota (serve --tenants).'));

  const cost = s.cost || [];
  $('#cost').replaceChildren(cost.length
    ? table(['Workload', 'GPU-hours', 'Energy (kWh)', 'Cost'], cost.map((c) => el('tr', { 'data-workload': c.workload },
      el('td', {}, c.workload), el('td', { class: 'num' }, fmtNum(c.gpu_hours, 2)),
      el('td', { class: 'num' }, fmtNum(c.energy_kwh, 2)),
      el('td', { class: 'num' }, c.currency ? `${fmtNum(c.cost, 2)} ${c.currency}` : fmtNum(c.cost, 2)))))
    : el('p', { class: 'muted' }, 'No GPU time used in this window.'));

  const fc = s.forecasts || [];
  Charts.scatter($('#forecast-chart'), fc.map((f) => ({
    label: f.job, actual: f.actual_s / 60, p50: f.duration_p50_s / 60, p90: f.duration_p90_s / 60,
    title: `${f.job}: took ${fmtDuration(f.actual_s)}, forecast P50 ${fmtDuration(f.duration_p50_s)}, P90 ${fmtDuration(f.duration_p90_s)}`,
  })), { unit: 'min' });
}

function renderRecommendations(recs) {
  if (recs.length === 0) {
    $('#recommendations').replaceChildren(el('p', { class: 'muted' }, 'No recommendations.'));
    return;
  }
  $('#recommendations').replaceChildren(table(['Time', 'Kind', 'Job', 'Reason', 'Status'], recs.map((r) =>
    el('tr', { 'data-recommendation': r.id },
      el('td', {}, fmtTime(r.time)), el('td', {}, r.kind), el('td', { class: 'mono' }, r.job || ''),
      el('td', {}, r.reason), el('td', {}, r.status)))));
}

// IDLE_LEADS are the lead times (s) the idle panel shows, of the
// forecast's 15-minute steps.
const IDLE_LEADS = [900, 1800, 3600, 7200];

// renderIdle shows each pool's expected idle GPUs over the next two
// hours (with the idle model's P10-P90 where it has telemetry) and the
// running jobs whose GPUs sit idle.
function renderIdle(f) {
  const leads = (f && f.leads_s) || [];
  const pools = (f && f.pools) || [];
  const at = (arr, lead) => {
    const i = leads.indexOf(lead);
    return i >= 0 && arr && i < arr.length ? arr[i] : undefined;
  };
  const cell = (p, lead) => {
    const v = at(p.expected, lead);
    const lo = at(p.p10, lead), hi = at(p.p90, lead);
    return el('td', { class: 'num' }, fmtNum(v) + (Number.isFinite(lo) && Number.isFinite(hi) ? ` (${fmtNum(lo, 0)}–${fmtNum(hi, 0)})` : ''));
  };
  const rows = pools.map((p) => el('tr', { 'data-pool': p.id },
    el('td', { class: 'mono' }, p.id), el('td', { class: 'num' }, p.gpus), IDLE_LEADS.map((l) => cell(p, l))));
  const source = f && f.model_version ? `idle model v${f.model_version}` : 'running jobs and the queue only (no idle model)';
  const idleJobs = (f && f.idle_jobs) || [];
  $('#idle').replaceChildren(
    table(['Pool', 'GPUs'].concat(IDLE_LEADS.map((l) => 'in ' + fmtDuration(l))), rows),
    el('p', { class: 'muted' }, `Expected idle GPUs (below ${fmtNum(f && f.threshold_pct, 0)}% utilization or unallocated); ` +
      `${(f && f.telemetry_gpus) || 0} GPUs with telemetry, ${fmtNum(f && f.queued_gpus)} GPUs queued; from ${source}.`),
    idleJobs.length === 0 ? el('p', { class: 'muted' }, 'No running job holds only idle GPUs.') :
      table(['Job holding idle GPUs', 'GPUs', 'Idle for'], idleJobs.map((j) => el('tr', { 'data-idle-job': j.job_id },
        el('td', { class: 'mono' }, j.job_id), el('td', { class: 'num' }, j.gpus), el('td', {}, fmtDuration(j.idle_for_s))))));
}

// ---- submit ---------------------------------------------------------------

// parseCommand takes a JSON array of strings or words separated by spaces.
function parseCommand(s) {
  s = s.trim();
  if (!s) return undefined;
  if (s.startsWith('[')) {
    let v;
    try { v = JSON.parse(s); } catch (e) { throw new Error(`command: not a JSON array: ${e.message}`); }
    if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) throw new Error('command: the JSON array must hold strings only');
    return v;
  }
  return s.split(/\s+/);
}

function submitBody() {
  const gpus = Number($('#submit-gpus').value);
  const milli = Number($('#submit-gpu-milli').value);
  if (!Number.isInteger(gpus) || gpus < 0) throw new Error('GPUs: want a whole number, 0 or more');
  if (!Number.isInteger(milli) || milli < 1 || milli > 1000) throw new Error('share of each GPU: want 1 to 1000 milli-GPUs');
  const body = {
    name: $('#submit-name').value.trim(),
    tier: $('#submit-tier').value,
    gpus,
    gpu_milli: milli,
    checkpointable: $('#submit-checkpointable').checked,
  };
  const labels = parseLabels($('#submit-labels').value);
  if (Object.keys(labels).length) body.labels = labels;
  const command = parseCommand($('#submit-command').value);
  if (command) body.command = command;
  const dl = $('#submit-deadline').value;
  if (dl) {
    const d = new Date(dl + 'Z'); // the field is in UTC
    if (Number.isNaN(d.getTime())) throw new Error(`deadline: "${dl}" is not a date and time`);
    body.deadline = d.toISOString().replace(/\.\d{3}Z$/, 'Z'); // RFC 3339 in whole seconds
  }
  return body;
}

async function submit(ev) {
  ev.preventDefault();
  const out = $('#submit-result');
  out.hidden = false;
  out.className = 'muted';
  out.removeAttribute('data-job-id');
  let body;
  try {
    body = submitBody();
  } catch (e) {
    out.className = 'error';
    out.textContent = e.message;
    return;
  }
  out.textContent = 'Submitting…';
  const btn = $('#submit-button');
  btn.disabled = true;
  try {
    const j = await api('POST', '/v1/jobs', body);
    const job = j && j.job ? j.job : j;
    out.className = 'ok';
    out.dataset.jobId = job.id;
    out.textContent = `Submitted ${job.id} (${job.state})` +
      (job.forecast ? `: forecast ${fmtForecast(job.forecast)}` : '') +
      (job.deadline_feasible === false ? ' — the deadline cannot be met' : '');
    refresh();
  } catch (err) {
    if (err.status === 401) return; // the session ended: the login form says so
    out.className = 'error';
    out.textContent = 'Not submitted: ' + describeError(err);
  } finally {
    btn.disabled = false;
  }
}

// ---- start ----------------------------------------------------------------

// refresh is reachable from outside for the benchmarks (a refresh at once, awaited).
window.PrescientDashboard = Object.freeze({ refresh });

hooks.sessionEnded = (err) => {
  sessionStorage.removeItem(TOKEN_KEY);
  showLogin('Your session ended: ' + describeError(err));
};
hooks.refresh = () => { if (!$('#app').hidden) refresh(); };

function start() {
  $('#login-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const token = $('#token').value.trim();
    $('#token').value = '';
    if (token) login(token);
  });
  $('#logout').addEventListener('click', logout);
  $('#window').addEventListener('change', () => { if (!$('#app').hidden) refresh(); });
  $('#submit-form').addEventListener('submit', submit);
  setupConfirm();
  setupJobs();
  setupFleet(() => { if (lastFleet) renderFleet(lastFleet); }, (id, from) => openJob(id, from));
  setupWhatIf();
  setupModels();
  // The token lives in sessionStorage: a reload of this tab keeps the
  // session, a new tab or browser does not.
  if (sessionStorage.getItem(TOKEN_KEY)) showApp(null);
  else showLogin('');
}

// Modules run after the document is parsed; DOMContentLoaded may have passed.
if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
else start();
