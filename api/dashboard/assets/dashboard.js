// Prescient's dashboard: asks for a token, keeps it in sessionStorage, and
// shows what the JSON API under /v1 answers (Authorization: Bearer). Every
// error is shown where it happened; a 401 goes back to the login form with
// the server's message.
'use strict';

(function () {
  const TOKEN_KEY = 'prescient.token';
  const REFRESH_MS = 5000;
  const JOB_LIMIT = 200; // jobs the list shows, newest first
  // An inference node's loan to training (serve --lend-pools), as its badge says it.
  const LOAN = { serving: 'inference', lent: 'lent to training', returning: 'returning to inference' };

  const $ = (sel) => document.querySelector(sel);
  let timer = null;
  let generation = 0; // bumped at login and logout so that late answers of an old session are dropped

  // ---- the API ------------------------------------------------------------

  class APIError extends Error {
    constructor(status, code, message, path) {
      super(message);
      this.status = status; // 0 for a network error
      this.code = code;
      this.path = path;
    }
    // describe says what went wrong in words, with the status and the server's message.
    describe() {
      if (this.status === 0) return `network error: cannot reach the API (${this.path}): ${this.message}`;
      const what = { 400: 'bad request', 401: 'unauthorized', 403: 'forbidden', 404: 'not found', 409: 'conflict',
        413: 'too large', 429: 'too many requests', 500: 'server error', 502: 'bad gateway', 503: 'unavailable' }[this.status] || 'error';
      return `${this.status} ${what} (${this.path}): ${this.message}`;
    }
  }

  async function api(method, path, body) {
    const headers = { Accept: 'application/json' };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = 'Bearer ' + token;
    const init = { method, headers, cache: 'no-store' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let resp;
    try {
      resp = await fetch(path, init);
    } catch (e) {
      throw new APIError(0, 'network', e.message || String(e), `${method} ${path}`);
    }
    const text = await resp.text();
    let data = null;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch (e) {
        if (resp.ok) throw new APIError(resp.status, 'bad_response', 'the answer is not JSON: ' + text.slice(0, 120), `${method} ${path}`);
      }
    }
    if (!resp.ok) {
      const err = data && data.error ? data.error : { code: 'http_' + resp.status, message: text.slice(0, 200) || resp.statusText };
      throw new APIError(resp.status, err.code, err.message, `${method} ${path}`);
    }
    return data;
  }

  // list takes a listing's array whether the API wraps it in an object or not.
  function list(data, key) {
    if (Array.isArray(data)) return data;
    if (data && Array.isArray(data[key])) return data[key];
    return [];
  }

  // ---- formatting and DOM helpers -----------------------------------------

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k.startsWith('data-')) e.setAttribute(k, String(v));
      else if (k in e) e[k] = v;
      else e.setAttribute(k, String(v));
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null) continue;
      e.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
    }
    return e;
  }

  function table(headers, rows, attrs) {
    return el('table', attrs,
      el('thead', {}, el('tr', {}, headers.map((h) => el('th', {}, h)))),
      el('tbody', {}, rows));
  }

  function fmtDuration(s) {
    if (s === undefined || s === null || !Number.isFinite(s)) return '–';
    const a = Math.abs(s);
    if (a < 120) return `${s.toFixed(0)} s`;
    if (a < 7200) return `${(s / 60).toFixed(1)} min`;
    if (a < 172800) return `${(s / 3600).toFixed(1)} h`;
    return `${(s / 86400).toFixed(1)} d`;
  }

  function fmtTime(t) {
    if (!t) return '–';
    const d = new Date(t);
    if (Number.isNaN(d.getTime())) return String(t);
    return d.toISOString().replace('T', ' ').slice(0, 19) + 'Z';
  }

  function fmtNum(v, digits) {
    return Number.isFinite(v) ? v.toFixed(digits === undefined ? 1 : digits) : '–';
  }

  function fmtBytes(b) {
    if (!Number.isFinite(b)) return '–';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (b >= 1024 && i < units.length - 1) { b /= 1024; i++; }
    return `${b.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
  }

  function fmtForecast(f) {
    if (!f) return '–';
    return `P50 ${fmtDuration(f.duration_p50_s)} · P90 ${fmtDuration(f.duration_p90_s)}` +
      (f.memory_p90_bytes ? ` · mem P90 ${fmtBytes(f.memory_p90_bytes)}` : '') +
      (f.memory_p90_refined_bytes ? ` (refined ${fmtBytes(f.memory_p90_refined_bytes)})` : '');
  }

  function showSectionError(key, err) {
    const p = document.querySelector(`.section-error[data-for="${key}"]`);
    if (!p) return;
    p.textContent = err ? err.describe() : '';
    p.hidden = !err;
  }

  function showBanner(messages) {
    const b = $('#error');
    b.replaceChildren(...messages.map((m) => el('div', {}, m)));
    b.hidden = messages.length === 0;
  }

  // ---- login --------------------------------------------------------------

  function showLogin(message) {
    stopRefresh();
    generation++;
    $('#app').hidden = true;
    $('#logout').hidden = true;
    $('#mode').hidden = true;
    $('#window-label').hidden = true;
    $('#refreshed').textContent = '';
    showBanner([]);
    $('#login').hidden = false;
    const e = $('#login-error');
    e.textContent = message || '';
    e.hidden = !message;
    $('#token').focus();
  }

  async function login(token) {
    sessionStorage.setItem(TOKEN_KEY, token);
    const btn = $('#login-submit');
    btn.disabled = true;
    try {
      // The fleet is what every role may read; it proves the token.
      await api('GET', '/v1/fleet');
    } catch (err) {
      if (err.status === 401 || err.status === 403) sessionStorage.removeItem(TOKEN_KEY);
      const why = err.status === 401 ? 'The API did not accept this token. ' : '';
      showLogin(why + err.describe());
      return;
    } finally {
      btn.disabled = false;
    }
    showApp();
  }

  function logout() {
    sessionStorage.removeItem(TOKEN_KEY);
    showLogin('');
  }

  function showApp() {
    generation++;
    $('#login').hidden = true;
    $('#app').hidden = false;
    $('#logout').hidden = false;
    $('#window-label').hidden = false;
    refresh();
  }

  // ---- refresh ------------------------------------------------------------

  function stopRefresh() {
    if (timer !== null) clearTimeout(timer);
    timer = null;
  }

  async function refresh() {
    stopRefresh();
    const gen = generation;
    const parts = [
      ['fleet', () => api('GET', '/v1/fleet'), renderFleet],
      ['stats', () => api('GET', '/v1/stats?window_s=' + encodeURIComponent($('#window').value)), renderStats],
      ['jobs', () => api('GET', '/v1/jobs?limit=' + JOB_LIMIT), (d) => renderJobs(list(d, 'jobs'))],
      ['recommendations', () => api('GET', '/v1/recommendations?limit=50'), (d) => renderRecommendations(list(d, 'recommendations'))],
      // A fleet with no GPU up answers 404: an empty panel, not an error.
      ['idle', () => api('GET', '/v1/forecasts/idle?horizon_s=7200&step_s=900')
        .catch((e) => { if (e instanceof APIError && e.status === 404) return null; throw e; }), renderIdle],
    ];
    const results = await Promise.allSettled(parts.map(([, fetchIt]) => fetchIt()));
    if (gen !== generation) return;
    const errors = [];
    for (let i = 0; i < parts.length; i++) {
      const [key, , render] = parts[i];
      const r = results[i];
      if (r.status === 'rejected') {
        const err = r.reason instanceof APIError ? r.reason : new APIError(-1, 'client', String(r.reason), key);
        if (err.status === 401) {
          sessionStorage.removeItem(TOKEN_KEY);
          showLogin('Your session ended: ' + err.describe());
          return;
        }
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
        errors.push(`${key}: ${err.message}`);
      }
    }
    showBanner(errors);
    $('#refreshed').textContent = 'updated ' + new Date().toISOString().slice(11, 19) + ' UTC';
    timer = setTimeout(refresh, REFRESH_MS);
  }

  // ---- sections -----------------------------------------------------------

  function renderFleet(f) {
    const mode = $('#mode');
    mode.textContent = f.mode || '';
    mode.hidden = !f.mode;
    const nodes = f.nodes || [];
    let utilSum = 0, utilN = 0, powerW = 0;
    for (const n of nodes) for (const g of n.gpus || []) {
      if (Number.isFinite(g.utilization_pct)) { utilSum += g.utilization_pct; utilN++; }
      if (Number.isFinite(g.power_w)) powerW += g.power_w;
    }
    $('#summary').replaceChildren(
      card('GPUs', `${f.gpus}`, `${fmtNum(f.gpus_busy)} allocated`, 'summary-gpus'),
      card('Utilization now', utilN ? `${fmtNum(utilSum / utilN)} %` : '–', utilN ? `mean of ${utilN} GPUs` : 'no recent telemetry', 'summary-util'),
      card('Power now', utilN ? `${fmtNum(powerW / 1000, 2)} kW` : '–', '', 'summary-power'),
      card('Queued', `${f.queued}`, '', 'summary-queued'),
      card('Running', `${f.running}`, '', 'summary-running'),
    );
    $('#fleet').replaceChildren(...nodes.map((n) =>
      el('div', { class: 'node state-' + n.state, 'data-node': n.name },
        el('h3', {}, n.name, ' ', el('span', { class: 'badge' }, n.state), n.agent ? el('span', { class: 'badge ok' }, 'agent') : null,
          n.loan ? el('span', { class: 'badge loan loan-' + n.loan.state, title: 'inference pool ' + n.loan.pool }, LOAN[n.loan.state] || n.loan.state) : null),
        el('div', { class: 'gpus' }, (n.gpus || []).map((g) => gpuTile(n.name, g))))));
    if (nodes.length === 0) $('#fleet').replaceChildren(el('p', { class: 'muted' }, 'No nodes registered.'));
  }

  function card(title, value, sub, id) {
    return el('div', { class: 'card', id }, el('div', { class: 'card-title' }, title), el('div', { class: 'card-value' }, value),
      sub ? el('div', { class: 'muted' }, sub) : null);
  }

  function gpuTile(node, g) {
    const alloc = Math.min(1000, g.allocated_milli || 0);
    const bar = el('div', { class: 'alloc' }, el('div', { class: 'alloc-fill' }));
    bar.firstChild.style.width = `${alloc / 10}%`;
    const lines = [
      el('div', { class: 'gpu-head' }, `gpu${g.index}`, el('span', { class: 'muted' }, ' ' + (g.model || ''))),
      bar,
      el('div', { class: 'muted' }, `alloc ${alloc / 10}%` +
        (Number.isFinite(g.utilization_pct) ? ` · util ${fmtNum(g.utilization_pct, 0)}%` : '') +
        (Number.isFinite(g.power_w) ? ` · ${fmtNum(g.power_w, 0)} W` : '') +
        (Number.isFinite(g.memory_used_bytes) ? ` · ${fmtBytes(g.memory_used_bytes)} / ${fmtBytes(g.memory_bytes)}` : '')),
    ];
    for (const j of g.jobs || []) lines.push(el('div', { class: 'gpu-job', 'data-job-id': j }, j));
    return el('div', { class: 'gpu' + (alloc > 0 ? ' busy' : ''), 'data-gpu': `${node}/gpu${g.index}` }, lines);
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

    const failures = s.failures || [];
    $('#outcomes').replaceChildren(
      el('p', {}, el('span', { id: 'completed', class: 'big ok' }, String(s.completed || 0)), ' completed · ',
        el('span', { id: 'failed', class: 'big bad' }, String(s.failed || 0)), ' failed ',
        el('span', { class: 'muted' }, `(${fmtTime(s.from)} to ${fmtTime(s.until)})`)),
      failures.length ? table(['Failure reason', 'Jobs'], failures.map((f) =>
        el('tr', {}, el('td', {}, f.reason || '(none given)'), el('td', { class: 'num' }, String(f.count)))), { id: 'failures' })
        : el('p', { class: 'muted' }, 'No failures in this window.'));

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

  const ACTIVE = new Set(['queued', 'running', 'checkpointing']);

  function renderJobs(jobs) {
    if (jobs.length === 0) {
      $('#jobs').replaceChildren(el('p', { class: 'muted' }, 'No jobs.'));
      return;
    }
    const rows = jobs.map((j) => {
      const deadline = j.deadline
        ? fmtTime(j.deadline) + (j.deadline_feasible === false ? ' (at risk)' : j.deadline_feasible === true ? ' (feasible)' : '')
        : '–';
      const cancel = ACTIVE.has(j.state) ? el('button', { type: 'button', class: 'cancel', 'data-cancel': j.id }, 'Cancel') : null;
      return el('tr', { 'data-job-id': j.id, 'data-state': j.state },
        el('td', { class: 'mono' }, j.id),
        el('td', {}, el('span', { class: 'job-name' }, j.name || ''), labelsOf(j.labels)),
        el('td', {}, j.tenant),
        el('td', {}, j.tier),
        el('td', { class: 'num' }, j.gpu_milli && j.gpu_milli < 1000 ? `${j.gpus} × ${j.gpu_milli}m` : String(j.gpus)),
        el('td', { class: 'state' }, el('span', { class: 'badge state-' + j.state }, j.state),
          j.exit_code !== undefined && j.exit_code !== null ? ` exit ${j.exit_code}` : ''),
        el('td', { class: 'placement' }, (j.placement || []).join(', ') || '–'),
        el('td', { class: 'forecast' }, fmtForecast(j.forecast)),
        el('td', {}, j.start_time ? 'started ' + fmtTime(j.start_time) : j.predicted_start ? 'start ≈ ' + fmtTime(j.predicted_start) : '–',
          j.predicted_end && !j.end_time ? el('div', { class: 'muted' }, 'end ≈ ' + fmtTime(j.predicted_end)) : null,
          j.end_time ? el('div', { class: 'muted' }, 'ended ' + fmtTime(j.end_time)) : null),
        el('td', {}, deadline),
        el('td', { class: 'reason' }, j.reason || ''),
        el('td', {}, cancel));
    });
    $('#jobs').replaceChildren(table(['ID', 'Name', 'Tenant', 'Tier', 'GPUs', 'State', 'Placement', 'Forecast',
      'Start / end', 'Deadline', 'Reason', ''], rows),
      el('p', { class: 'muted', hidden: jobs.length < JOB_LIMIT }, `The newest ${JOB_LIMIT} jobs.`));
  }

  function labelsOf(labels) {
    const keys = Object.keys(labels || {}).sort();
    if (keys.length === 0) return null;
    return el('div', { class: 'labels' }, keys.map((k) => el('span', { class: 'label' }, `${k}=${labels[k]}`)));
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

  // ---- actions --------------------------------------------------------------

  // parseLabels reads "k=v, k2=v2"; an error names the field and the bad part.
  function parseLabels(s) {
    const out = {};
    for (const part of s.split(',').map((p) => p.trim()).filter(Boolean)) {
      const i = part.indexOf('=');
      if (i <= 0) throw new Error(`labels: "${part}" is not key=value`);
      out[part.slice(0, i).trim()] = part.slice(i + 1).trim();
    }
    return out;
  }

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
      if (err.status === 401) {
        sessionStorage.removeItem(TOKEN_KEY);
        showLogin('Your session ended: ' + err.describe());
        return;
      }
      out.className = 'error';
      out.textContent = 'Not submitted: ' + (err.describe ? err.describe() : err.message);
    } finally {
      btn.disabled = false;
    }
  }

  async function cancelJob(id, btn) {
    btn.disabled = true;
    try {
      await api('DELETE', '/v1/jobs/' + encodeURIComponent(id));
      refresh();
    } catch (err) {
      if (err.status === 401) { showLogin('Your session ended: ' + err.describe()); return; }
      showBanner([`cancel ${id}: ${err.describe()}`]);
      btn.disabled = false;
    }
  }

  // ---- start ----------------------------------------------------------------

  // refresh is reachable from outside for the benchmarks (a refresh at once, awaited).
  window.PrescientDashboard = Object.freeze({ refresh });

  document.addEventListener('DOMContentLoaded', () => {
    $('#login-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const token = $('#token').value.trim();
      $('#token').value = '';
      if (token) login(token);
    });
    $('#logout').addEventListener('click', logout);
    $('#window').addEventListener('change', () => { if (!$('#app').hidden) refresh(); });
    $('#submit-form').addEventListener('submit', submit);
    $('#jobs').addEventListener('click', (ev) => {
      const id = ev.target && ev.target.dataset ? ev.target.dataset.cancel : undefined;
      if (id) cancelJob(id, ev.target);
    });
    if (sessionStorage.getItem(TOKEN_KEY)) showApp();
    else showLogin('');
  });
})();
