// The what-if panel (POST /v1/whatif): add a job, remove a job, remove a
// node, order by another policy, put changed tenants in force (an admin
// starts from a copy of those in force), and see both plans' figures (mean wait, makespan, deadlines met)
// and each job's start and end now and in the scenario. Nothing changes in
// the control plane; it only simulates.

import { $, api, el, table, parseLabels, isAdmin, describeError, fmtDuration, fmtDelta, fmtTime } from './core.js';

const MAX_ROWS = 100; // jobs the per-job table shows, the most changed first

// nodeNames keeps the node list of the form's "remove a node" in step with the fleet.
export function noteNodes(names) {
  const sel = $('#whatif-remove-node');
  const have = [...sel.options].map((o) => o.value).filter(Boolean);
  if (have.length === names.length && have.every((n, i) => n === names[i])) return;
  const keep = sel.value;
  sel.replaceChildren(el('option', { value: '' }, '(none)'), ...names.map((n) => el('option', { value: n }, n)));
  sel.value = names.includes(keep) ? keep : '';
}

// question reads the form into POST /v1/whatif's body; an error names the field.
function question() {
  const body = {};
  const gpus = $('#whatif-gpus').value.trim();
  if (gpus !== '') {
    const n = Number(gpus);
    if (!Number.isInteger(n) || n < 1) throw new Error('add a job: GPUs: want a whole number, 1 or more');
    const job = { gpus: n, tier: $('#whatif-tier').value };
    const name = $('#whatif-name').value.trim();
    if (name) job.name = name;
    const labels = parseLabels($('#whatif-labels').value, 'add a job: labels');
    if (Object.keys(labels).length) job.labels = labels;
    body.add_jobs = [job];
  }
  const remove = $('#whatif-remove-job').value.trim();
  if (remove) body.remove_jobs = [remove];
  const node = $('#whatif-remove-node').value;
  if (node) body.remove_nodes = [node];
  const policy = $('#whatif-policy').value.trim();
  if (policy) body.policy = policy;
  const tenants = $('#whatif-tenants').value.trim();
  if (tenants) {
    let list;
    try {
      list = JSON.parse(tenants);
    } catch (e) {
      throw new Error('tenants: not JSON: ' + e.message);
    }
    if (!Array.isArray(list)) throw new Error('tenants: want a list, [{"name": ...}, ...]');
    body.tenants = list;
  }
  if (!body.add_jobs && !body.remove_jobs && !body.remove_nodes && !body.policy && !body.tenants) {
    throw new Error('Ask for a change: add a job, remove a job or a node, name another policy, or change the tenants.');
  }
  return body;
}

// tenantsFileList turns GET /v1/tenants into a tenants file's list, the
// form POST /v1/whatif takes, leaving out what is the default.
export function tenantsFileList(info) {
  return (info.tenants || []).map((t) => {
    const e = { name: t.name, weight: t.weight };
    if (t.cohort) e.cohort = t.cohort;
    if ((t.quotas || []).length) {
      e.quota = t.quotas.map((q) => {
        const x = { gpus: q.nominal_gpus };
        if (q.model) x.model = q.model;
        if (q.borrowing_limit_gpus != null) x.borrowing_limit = q.borrowing_limit_gpus;
        if (q.lending_limit_gpus != null) x.lending_limit = q.lending_limit_gpus;
        return x;
      });
    }
    if ((t.tiers || []).length && t.tiers.length < TIERS) e.tiers = t.tiers;
    if (t.max_running_jobs) e.max_running_jobs = t.max_running_jobs;
    if (t.reclaim && t.reclaim !== 'any') e.reclaim = t.reclaim;
    return e;
  });
}

const TIERS = 4; // a tenant allowed every tier lists them all

// loadTenants copies the tenants in force into the form, to edit (admins).
async function loadTenants() {
  const out = $('#whatif-result');
  try {
    const info = await api('GET', '/v1/tenants');
    $('#whatif-tenants').value = JSON.stringify(tenantsFileList(info), null, 2);
  } catch (err) {
    if (err.status === 401) return;
    out.dataset.state = 'error';
    out.replaceChildren(el('p', { class: 'error' }, 'The tenants in force: ' + describeError(err)));
  }
}

// noteRole shows the copy of the tenants in force to admins only: only
// they may read them.
export function noteRole() {
  $('#whatif-tenants-load').hidden = !isAdmin();
}

async function ask(ev) {
  ev.preventDefault();
  const out = $('#whatif-result');
  out.dataset.state = 'asking';
  let body;
  try {
    body = question();
  } catch (e) {
    out.dataset.state = 'error';
    out.replaceChildren(el('p', { class: 'error' }, e.message));
    return;
  }
  out.replaceChildren(el('p', { class: 'muted' }, 'Simulating…'));
  const btn = $('#whatif-button');
  btn.disabled = true;
  try {
    const res = await api('POST', '/v1/whatif', body);
    render(res, body);
    out.dataset.state = 'done';
  } catch (err) {
    if (err.status === 401) return;
    out.dataset.state = 'error';
    out.replaceChildren(el('p', { class: 'error' }, 'No answer: ' + describeError(err)));
  } finally {
    btn.disabled = false;
  }
}

// asked says the question back in words.
function asked(body) {
  const parts = [];
  for (const j of body.add_jobs || []) parts.push(`add a ${j.tier} job of ${j.gpus} GPU${j.gpus > 1 ? 's' : ''}`);
  for (const id of body.remove_jobs || []) parts.push(`remove job ${id}`);
  for (const n of body.remove_nodes || []) parts.push(`remove node ${n}`);
  if (body.policy) parts.push(`order the queue by ${body.policy}`);
  if (body.tenants) parts.push(`put ${body.tenants.length} tenant${body.tenants.length === 1 ? '' : 's'} in force`);
  return parts.join(', ');
}

function render(res, body) {
  const b = res.baseline || {}, s = res.scenario || {};
  const deadlines = (x) => (x.deadlines_total ? `${x.deadlines_met} of ${x.deadlines_total}` : 'none set');
  const summary = table(['', 'Now', 'Scenario', 'Change'], [
    el('tr', { 'data-figure': 'mean-wait' }, el('th', {}, 'Mean wait'), el('td', { class: 'num' }, fmtDuration(b.mean_wait_s)),
      el('td', { class: 'num' }, fmtDuration(s.mean_wait_s)), el('td', { class: 'num' }, fmtDelta(s.mean_wait_s - b.mean_wait_s))),
    el('tr', { 'data-figure': 'makespan' }, el('th', {}, 'Makespan'), el('td', { class: 'num' }, fmtDuration(b.makespan_s)),
      el('td', { class: 'num' }, fmtDuration(s.makespan_s)), el('td', { class: 'num' }, fmtDelta(s.makespan_s - b.makespan_s))),
    el('tr', { 'data-figure': 'deadlines' }, el('th', {}, 'Deadlines met'), el('td', { class: 'num' }, deadlines(b)),
      el('td', { class: 'num' }, deadlines(s)), el('td', { class: 'num' }, b.deadlines_total || s.deadlines_total
        ? String(s.deadlines_met - b.deadlines_met) : '–')),
  ], { class: 'whatif-summary' });

  // The jobs the change moves most come first; the hypothetical one leads.
  const jobs = (res.jobs || []).slice().sort((x, y) => (y.hypothetical ? 1 : 0) - (x.hypothetical ? 1 : 0) ||
    Math.abs(y.delta_end_s || 0) - Math.abs(x.delta_end_s || 0) || String(x.job).localeCompare(String(y.job)));
  const moved = jobs.filter((j) => j.hypothetical || Math.abs(j.delta_end_s || 0) >= 0.5).length;
  const rows = jobs.slice(0, MAX_ROWS).map((j) => el('tr', { 'data-whatif-job': j.job, class: j.hypothetical ? 'hypothetical' : '' },
    el('td', { class: 'mono' }, j.job, j.hypothetical ? el('span', { class: 'badge' }, 'added') : null),
    el('td', {}, j.hypothetical ? '–' : j.baseline_beyond_horizon ? 'after ' + fmtTime(res.horizon) : fmtTime(j.baseline_start)),
    el('td', {}, j.start ? fmtTime(j.start) : j.beyond_horizon ? 'after ' + fmtTime(res.horizon) : 'does not start'),
    el('td', {}, j.hypothetical ? '–' : fmtTime(j.baseline_end)), el('td', {}, j.end ? fmtTime(j.end) : '–'),
    el('td', { class: 'num delta' }, j.hypothetical ? (j.start && j.end ? 'runs ' + fmtDuration((Date.parse(j.end) - Date.parse(j.start)) / 1000) : '–') : fmtDelta(j.delta_end_s)),
    el('td', {}, j.deadline_feasible === true ? 'met' : j.deadline_feasible === false ? 'missed' : '–')));
  $('#whatif-result').replaceChildren(...[ // without a horizon, no paragraph (replaceChildren would write "null")
    el('p', {}, 'If we ', el('strong', {}, asked(body)), ` (policy ${res.policy || 'as now'}; simulated in ${!Number.isFinite(res.wall_s) ? '–' : res.wall_s < 0.001 ? 'under 1 ms' : (res.wall_s * 1000).toFixed(0) + ' ms'}):`),
    summary,
    res.horizon ? el('p', { class: 'muted', 'data-figure': 'horizon' }, `Followed until ${fmtTime(res.horizon)} (${
      res.horizon_reason === 'budget' ? 'the compute budget of an answer ran out' : res.horizon_reason === 'stalled' ? 'jobs are left that nothing starts' : 'the horizon asked'
    }): ${b.beyond_horizon} jobs start after it now, ${s.beyond_horizon} in the scenario; their times are not known.`) : null,
    el('p', { class: 'muted' }, `${jobs.length} jobs in the scenario, ${moved} of them added or moved` +
      (jobs.length > MAX_ROWS ? `; the ${MAX_ROWS} most changed are shown.` : '.')),
    jobs.length ? table(['Job', 'Start now', 'Start in scenario', 'End now', 'End in scenario', 'Change of end', 'Deadline'], rows, { class: 'whatif-jobs' })
      : el('p', { class: 'muted' }, 'No queued or running job.'),
  ].filter(Boolean));
}

export function setupWhatIf() {
  $('#whatif-form').addEventListener('submit', ask);
  $('#whatif-tenants-load').addEventListener('click', loadTenants);
}
