// The jobs panel: the listing filtered by tenant and state and paged with
// the API's next (GET /v1/jobs), cancel after a confirmation
// (DELETE /v1/jobs/{id}), and a job's detail in a dialog: its fields, its
// attempts, its events and the end of its log (GET /v1/jobs/{id},
// /events, /log).

import {
  $, api, APIError, el, fill, table, query, list, hooks, session, isAdmin, describeError, confirmAction,
  fmtDuration, fmtTime, fmtNum, fmtForecast, labelsOf,
} from './core.js';

export const PAGE_SIZE = 50; // jobs a page shows, newest first
const LOG_BYTES = 16 << 10; // the end of the log the detail shows per node
const ACTIVE = new Set(['queued', 'running', 'checkpointing']);

// ---- the listing: filters and pages ------------------------------------------

// view is what the listing shows: the filters, and the after= of each
// page up to the one shown (pages[0] is '', the newest).
const view = { tenant: '', states: [], pages: [''], page: 0, next: '' };
const tenantsSeen = new Set();

// jobsPath is the listing's request for the page shown.
export function jobsPath() {
  return '/v1/jobs' + query({
    limit: PAGE_SIZE,
    tenant: isAdmin() ? view.tenant : '', // the API lists a non-admin's own tenant
    state: view.states.join(','),
    after: view.pages[view.page],
  });
}

// fetchJobs fetches the page shown. A page whose first job left the
// selection (it changed state) cannot be continued: the listing starts
// again at the newest.
export async function fetchJobs() {
  try {
    return await api('GET', jobsPath());
  } catch (err) {
    if (err instanceof APIError && err.status === 400 && view.page > 0) {
      firstPage();
      const d = await api('GET', jobsPath());
      d.restarted = true;
      return d;
    }
    throw err;
  }
}

function firstPage() {
  view.pages = [''];
  view.page = 0;
}

export function noteTenants(keys) {
  let added = false;
  for (const k of keys) if (k && !tenantsSeen.has(k)) { tenantsSeen.add(k); added = true; }
  if (!added) return;
  $('#tenant-list').replaceChildren(...[...tenantsSeen].sort().map((t) => el('option', { value: t })));
}

export function renderJobs(data) {
  const jobs = list(data, 'jobs');
  view.next = (data && data.next) || '';
  noteTenants(jobs.map((j) => j.tenant));
  const ids = $('#active-jobs');
  ids.replaceChildren(...jobs.filter((j) => ACTIVE.has(j.state)).map((j) => el('option', { value: j.id })));
  renderFilterState(data && data.restarted);
  if (jobs.length === 0) {
    $('#jobs').replaceChildren(el('p', { class: 'muted' }, view.states.length || view.tenant ? 'No job matches these filters.' : 'No jobs.'));
    return;
  }
  $('#jobs').replaceChildren(table(['ID', 'Name', 'Tenant', 'Tier', 'GPUs', 'State', 'Placement', 'Forecast',
    'Start / end', 'Deadline', 'Reason', ''], jobs.map(jobRow), { class: 'jobs clickable' }));
}

function jobRow(j) {
  const deadline = j.deadline
    ? fmtTime(j.deadline) + (j.deadline_feasible === false ? ' (at risk)' : j.deadline_feasible === true ? ' (feasible)' : '')
    : '–';
  const cancel = ACTIVE.has(j.state) ? el('button', { type: 'button', class: 'cancel', 'data-cancel': j.id }, 'Cancel') : null;
  return el('tr', { 'data-job-id': j.id, 'data-state': j.state, title: 'Show job ' + j.id },
    el('td', { class: 'mono' }, el('button', { type: 'button', class: 'link', 'data-open': j.id }, j.id)),
    el('td', {}, el('span', { class: 'job-name' }, j.name || ''), labelsOf(j.labels)),
    el('td', { class: 'tenant' }, j.tenant),
    el('td', {}, j.tier),
    el('td', { class: 'num' }, gpusOf(j)),
    el('td', { class: 'state' }, el('span', { class: 'badge state-' + j.state }, j.state),
      j.exit_code !== undefined && j.exit_code !== null ? ` exit ${j.exit_code}` : ''),
    el('td', { class: 'placement' }, (j.placement || []).join(', ') || '–'),
    el('td', { class: 'forecast' }, fmtForecast(j.forecast)),
    el('td', {}, j.start_time ? 'started ' + fmtTime(j.start_time) : j.predicted_start ? 'start ≈ ' + fmtTime(j.predicted_start)
      : j.predicted_start_after ? 'starts after ' + fmtTime(j.predicted_start_after) : '–',
      j.predicted_end && !j.end_time ? el('div', { class: 'muted' }, 'end ≈ ' + fmtTime(j.predicted_end)) : null,
      j.end_time ? el('div', { class: 'muted' }, 'ended ' + fmtTime(j.end_time)) : null),
    el('td', {}, deadline),
    el('td', { class: 'reason' }, j.reason || ''),
    el('td', {}, cancel));
}

function gpusOf(j) {
  return j.gpu_milli && j.gpu_milli < 1000 ? `${j.gpus} × ${j.gpu_milli}m` : String(j.gpus);
}

// renderFilterState shows the tenant filter to admins (others see their
// own tenant), the page number and which page buttons apply.
function renderFilterState(restarted) {
  const admin = isAdmin();
  $('#filter-tenant-label').hidden = !admin;
  const own = $('#filter-tenant-own');
  own.hidden = admin || !session.identity;
  own.textContent = session.identity ? `tenant ${session.identity.tenant}` : '';
  $('#jobs-page').textContent = `page ${view.page + 1}` + (restarted ? ' (the listing changed: back to the newest)' : '');
  $('#jobs-newer').disabled = view.page === 0;
  $('#jobs-older').disabled = !view.next;
}

function applyFilters() {
  view.tenant = isAdmin() ? $('#filter-tenant').value.trim() : '';
  view.states = [...document.querySelectorAll('#filter-states input[name="state"]:checked')].map((c) => c.value);
  firstPage();
  hooks.refresh();
}

// ---- cancel ---------------------------------------------------------------------

// cancelJob asks for confirmation in the page's dialog, then cancels.
export async function cancelJob(id, btn) {
  const ok = await confirmAction({
    title: `Cancel job ${id}?`,
    message: 'A queued job leaves the queue; a running one is stopped (its progress since the last checkpoint is lost). This cannot be undone.',
    confirmLabel: 'Cancel the job', keepLabel: 'Keep it', danger: true,
  });
  if (!ok) return false;
  $('#jobs-error').hidden = true;
  $('#job-error').hidden = true;
  if (btn) btn.disabled = true;
  try {
    await api('DELETE', '/v1/jobs/' + encodeURIComponent(id));
  } catch (err) {
    if (err.status !== 401) showCancelError(id, err);
    if (btn) btn.disabled = false;
    return false;
  }
  hooks.refresh();
  if (detail.id === id) loadDetail();
  return true;
}

function showCancelError(id, err) {
  const msg = `cancel ${id}: ${describeError(err)}`;
  const where = detail.id === id ? $('#job-error') : $('#jobs-error');
  where.textContent = msg;
  where.dataset.kind = 'cancel';
  where.hidden = false;
}

// ---- the detail dialog ------------------------------------------------------------

// detail is the job the dialog shows and the attempt of its log.
const detail = { id: '', attempt: 0, opener: null, loading: null };

export function openJob(id, opener) {
  const d = $('#job-dialog');
  detail.id = id;
  detail.attempt = 0;
  detail.opener = opener || null;
  $('#job-title').textContent = 'Job ' + id;
  $('#job-state').replaceChildren();
  for (const s of ['#job-fields', '#job-attempts', '#job-events', '#job-log']) $(s).replaceChildren(el('p', { class: 'muted' }, 'Loading…'));
  $('#job-error').hidden = true;
  d.dataset.jobId = id;
  d.dataset.loaded = 'false';
  if (!d.open) d.showModal();
  loadDetail();
}

// refreshDetail reloads the open detail with the page's refresh, so that a
// running job's times and log move on.
export function refreshDetail() {
  // Not while the attempt menu has the focus: a redraw would close it under the reader.
  const picking = document.activeElement && document.activeElement.id === 'job-log-attempt';
  if ($('#job-dialog').open && detail.id && !detail.loading && !picking) loadDetail();
}

function closed() {
  const d = $('#job-dialog');
  if (d.open) return; // the close event of an earlier opening, arriving after this one
  detail.id = '';
  delete d.dataset.jobId;
  if (detail.opener && document.contains(detail.opener)) detail.opener.focus();
  detail.opener = null;
}

async function loadDetail() {
  const id = detail.id;
  const path = '/v1/jobs/' + encodeURIComponent(id);
  const p = (async () => {
    const [job, events] = await Promise.allSettled([api('GET', path), api('GET', path + '/events')]);
    if (detail.id !== id) return;
    if (job.status === 'rejected') {
      showDetailError(job.reason);
      return;
    }
    const j = job.value;
    let log = null;
    if (j.attempts > 0) {
      log = await api('GET', path + '/log' + query({ attempt: detail.attempt || '', bytes: LOG_BYTES }))
        .catch((err) => ({ error: err }));
      if (detail.id !== id) return;
    }
    renderDetail(j, events.status === 'fulfilled' ? events.value : { error: events.reason }, log);
  })().catch((err) => {
    // A failed log read is shown in its place; this is anything else, a bug included.
    if (detail.id === id) showDetailError(err instanceof APIError ? err : new APIError(-1, 'render', err.message, 'job ' + id));
  });
  detail.loading = p;
  try { await p; } finally { if (detail.loading === p) detail.loading = null; }
}

// showDetailError says why the detail could not be read; the next read
// that works clears it (a failed cancel's message stays).
function showDetailError(err) {
  const e = $('#job-error');
  e.textContent = describeError(err);
  e.dataset.kind = 'load';
  e.hidden = false;
}

function renderDetail(j, events, log) {
  const d = $('#job-dialog');
  if ($('#job-error').dataset.kind === 'load') $('#job-error').hidden = true;
  $('#job-title').textContent = 'Job ' + j.id + (j.name ? ' · ' + j.name : '');
  $('#job-state').replaceChildren(el('span', { class: 'badge state-' + j.state }, j.state));
  d.dataset.state = j.state;
  $('#job-cancel').hidden = !ACTIVE.has(j.state);
  renderFields(j);
  renderAttempts(j);
  renderEvents(events);
  renderLog(j, log);
  d.dataset.loaded = 'true';
}

function renderFields(j) {
  const energy = Number.isFinite(j.energy_kwh) ? `${fmtNum(j.energy_kwh, 2)} kWh`
    : (j.history || []).length ? 'unavailable (see the attempts)' : '–';
  const rows = [
    ['Name', j.name || '–'], ['Tenant', j.tenant + (j.user ? ` (user ${j.user})` : '')], ['Tier', j.tier],
    ['GPUs', gpusOf(j)], ['State', j.state + (j.exit_code !== undefined && j.exit_code !== null ? `, exit code ${j.exit_code}` : '')],
    ['Reason', j.reason || '–'], ['Last error', j.last_error || '–'], ['Attempts', String(j.attempts)],
    ['Submitted', fmtTime(j.submit_time)], ['Started', fmtTime(j.start_time)], ['Ended', fmtTime(j.end_time)],
    ['Predicted', j.predicted_start || j.predicted_end ? `start ${fmtTime(j.predicted_start)}, end ${fmtTime(j.predicted_end)}`
      : j.predicted_start_after ? `start after ${fmtTime(j.predicted_start_after)} (beyond the queue forecast)` : '–'],
    ['Deadline', j.deadline ? fmtTime(j.deadline) + (j.deadline_feasible === false ? ' (at risk)' : j.deadline_feasible === true ? ' (feasible)' : '') +
      (j.latest_start ? `; latest start ${fmtTime(j.latest_start)}` : '') : '–'],
    ['Forecast', fmtForecast(j.forecast) + (j.forecast && j.forecast.source ? ` (${j.forecast.source})` : '')],
    ['Placement', (j.placement || []).join(', ') || '–'], ['Last checkpoint', fmtTime(j.last_checkpoint)],
    ['Run time', fmtDuration(j.run_s || 0)], ['GPU-hours', fmtNum(j.gpu_hours || 0, 2)], ['Energy', energy],
  ];
  fill($('#job-fields'), el('dl', { class: 'fields' }, rows.map(([k, v]) => [el('dt', {}, k), el('dd', { 'data-field': k }, v)])),
    labelsOf(j.labels));
}

function renderAttempts(j) {
  const hist = j.history || [];
  if (hist.length === 0) {
    $('#job-attempts').replaceChildren(el('p', { class: 'muted' }, 'No attempt yet: the job has not started.'));
    return;
  }
  const rows = hist.map((a) => el('tr', { 'data-attempt': a.attempt },
    el('td', { class: 'num' }, String(a.attempt)),
    el('td', { class: 'mono gpus-cell' }, (a.allocations || []).map((g) => `${g.node}/gpu${g.gpu}` + (g.milli < 1000 ? ` (${g.milli}m)` : '')).join(', ') || 'not recorded'),
    el('td', {}, fmtTime(a.start_time)),
    el('td', {}, a.end_time ? fmtTime(a.end_time) : 'running'),
    el('td', { class: 'num' }, fmtDuration(a.run_s)),
    el('td', { class: 'num' }, fmtNum(a.gpu_hours, 2)),
    el('td', { class: 'energy' }, Number.isFinite(a.energy_kwh) ? `${fmtNum(a.energy_kwh, 2)} kWh` : `unavailable: ${a.energy_unavailable || 'no reason given'}`),
    el('td', { class: 'ended-by' }, a.ended_by || (a.end_time ? '–' : 'still running'), a.message ? el('div', { class: 'muted' }, a.message) : null)));
  $('#job-attempts').replaceChildren(table(['#', 'GPUs', 'Start', 'End', 'Run time', 'GPU-hours', 'Energy', 'Ended by'], rows));
}

function renderEvents(events) {
  if (events && events.error) {
    $('#job-events').replaceChildren(el('p', { class: 'error' }, describeError(events.error)));
    return;
  }
  const evs = list(events, 'events');
  if (evs.length === 0) {
    $('#job-events').replaceChildren(el('p', { class: 'muted' }, 'No events.'));
    return;
  }
  $('#job-events').replaceChildren(table(['Time', 'Event', 'From → to', 'Message'], evs.map((e) => el('tr', { 'data-event': e.type },
    el('td', {}, fmtTime(e.time)), el('td', {}, e.type),
    el('td', {}, (e.from ? e.from + ' → ' : '') + (e.to || '')), el('td', {}, e.message || '')))));
}

function renderLog(j, log) {
  const box = $('#job-log');
  if (!log) {
    box.replaceChildren(el('p', { class: 'muted' }, 'No log: the job has not started.'));
    return;
  }
  const attempts = (j.history || []).map((a) => a.attempt);
  if (attempts.length === 0) for (let i = 1; i <= j.attempts; i++) attempts.push(i);
  const shown = log.error ? (detail.attempt || j.attempts) : log.attempt;
  const pick = el('select', { id: 'job-log-attempt', 'aria-label': 'attempt' },
    attempts.map((n) => el('option', { value: String(n), selected: n === shown }, `attempt ${n}` + (n === j.attempts ? ' (newest)' : ''))));
  const head = el('div', { class: 'log-head' }, el('label', {}, 'Log of ', pick), el('span', { class: 'muted' }, ` the last ${LOG_BYTES >> 10} KiB per node`));
  if (log.error) {
    box.replaceChildren(head, el('p', { class: 'error' }, describeError(log.error)));
    return;
  }
  // A redraw keeps a log where the reader scrolled it; one read to its end stays at the end.
  const kept = new Map();
  for (const pre of box.querySelectorAll('[data-log-node] pre.log')) {
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    kept.set(pre.parentElement.dataset.logNode + '/' + box.dataset.attempt, atEnd ? -1 : pre.scrollTop);
  }
  const nodes = log.nodes || [];
  fill(box, head, nodes.length === 0 ? el('p', { class: 'muted' }, 'No node reported a log.') : nodes.map((n) =>
    el('div', { class: 'node-log', 'data-log-node': n.node || '' },
      el('h4', {}, n.node || '(node not recorded)', n.truncated ? el('span', { class: 'muted' }, ' (the end of a longer log)') : null),
      n.unavailable ? el('p', { class: 'unavailable' }, 'unavailable: ' + n.unavailable)
        : n.text ? el('pre', { class: 'log' }, n.text) : el('p', { class: 'muted' }, 'The log is empty.'))));
  box.dataset.attempt = String(shown);
  for (const pre of box.querySelectorAll('[data-log-node] pre.log')) {
    const top = kept.get(pre.parentElement.dataset.logNode + '/' + shown);
    pre.scrollTop = top === undefined || top < 0 ? pre.scrollHeight : top; // a tail is read from its end
  }
}

// ---- wiring -----------------------------------------------------------------------

export function setupJobs() {
  $('#jobs').addEventListener('click', (ev) => {
    const t = ev.target instanceof Element ? ev.target : null;
    if (!t) return;
    const cancel = t.closest('[data-cancel]');
    if (cancel) {
      cancelJob(cancel.dataset.cancel, cancel);
      return;
    }
    const row = t.closest('tr[data-job-id]');
    if (row) openJob(row.dataset.jobId, row.querySelector('[data-open]'));
  });
  $('#jobs-filter').addEventListener('submit', (ev) => { ev.preventDefault(); applyFilters(); });
  $('#filter-states').addEventListener('change', applyFilters);
  $('#filter-tenant').addEventListener('change', applyFilters);
  $('#filter-clear').addEventListener('click', () => {
    $('#filter-tenant').value = '';
    for (const c of document.querySelectorAll('#filter-states input[name="state"]')) c.checked = false;
    applyFilters();
  });
  $('#jobs-older').addEventListener('click', () => {
    if (!view.next) return;
    view.pages = view.pages.slice(0, view.page + 1).concat([view.next]);
    view.page++;
    hooks.refresh();
  });
  $('#jobs-newer').addEventListener('click', () => {
    if (view.page === 0) return;
    view.page--;
    hooks.refresh();
  });

  const d = $('#job-dialog');
  $('#job-close').addEventListener('click', () => d.close());
  d.addEventListener('close', closed);
  // A click on the backdrop (outside the dialog's box) closes it too.
  d.addEventListener('click', (ev) => { if (ev.target === d) d.close(); });
  $('#job-cancel').addEventListener('click', (ev) => { if (detail.id) cancelJob(detail.id, ev.currentTarget); });
  $('#job-log').addEventListener('change', (ev) => {
    if (ev.target && ev.target.id === 'job-log-attempt') {
      detail.attempt = Number(ev.target.value);
      loadDetail();
    }
  });
}

// resetJobs forgets the filters and pages of a session that ended.
export function resetJobs() {
  view.tenant = '';
  view.states = [];
  firstPage();
  view.next = '';
  $('#filter-tenant').value = '';
  for (const c of document.querySelectorAll('#filter-states input[name="state"]')) c.checked = false;
  const d = $('#job-dialog');
  if (d.open) d.close();
}
