// The models panel (GET /v1/models: each target's versions, which is
// current and which serves, the learner selected and every learner's
// metrics) and the mode panel (the mode from GET /v1/fleet; an admin
// switches it with PUT /v1/mode after a confirmation).

import {
  $, api, el, fill, table, list, session, isAdmin, describeError, confirmAction, fmtDate, fmtDuration, fmtBytes, hooks,
} from './core.js';

const MODE_SAYS = {
  advisor: 'Advisor: the control plane plans and records recommendations; it starts, preempts and moves nothing.',
  autopilot: 'Autopilot: the control plane carries its plan out through the backend: it starts, preempts and resumes jobs.',
};

export function renderModels(data) {
  const models = list(data, 'models');
  const box = $('#models');
  if (models.length === 0) {
    box.replaceChildren(el('p', { class: 'muted' }, 'No model is published yet: forecasts come from the fallback rules.'));
    return;
  }
  const byTarget = new Map();
  for (const m of models) {
    if (!byTarget.has(m.target)) byTarget.set(m.target, []);
    byTarget.get(m.target).push(m);
  }
  fill(box, el('div', { class: 'models' }, [...byTarget].map(([target, versions]) => {
    versions.sort((a, b) => b.version - a.version);
    const current = versions.find((v) => v.current);
    const serving = versions.find((v) => v.serving);
    const shown = serving || current || versions[0];
    const note = !serving ? 'no version serves (none loaded)'
      : current && serving !== current ? `v${serving.version} serves: the current v${current.version} did not load` : '';
    return el('div', { class: 'model', 'data-target': target },
      el('h3', {}, target, ' ', el('span', { class: 'badge ok version' }, `v${shown.version}`),
        el('span', { class: 'muted' }, ` ${shown.selected ? 'learner ' + shown.selected : ''}`)),
      note ? el('p', { class: 'warn' }, note) : null,
      table(['Version', 'Created', 'Data', 'Selected learner', 'Current', 'Serving'], versions.map((v) =>
        el('tr', { 'data-version': v.version, class: v === shown ? 'shown' : '' },
          el('td', { class: 'num' }, `v${v.version}`), el('td', {}, fmtDate(v.created_at)),
          el('td', {}, fmtDate(v.data_from) === '–' ? '–' : `${fmtDate(v.data_from).slice(0, 10)} to ${fmtDate(v.data_until).slice(0, 10)}`),
          el('td', { class: 'selected' }, v.selected || '–'),
          el('td', { class: 'current' }, v.current ? 'current' : ''),
          el('td', { class: 'serving' }, v.serving ? 'serving' : ''))), { class: 'model-versions' }),
      metrics(shown));
  })));
}

// metrics is one version's metrics: a row per learner (the selected one
// marked), a column per metric.
function metrics(v) {
  const learners = Object.keys(v.metrics || {}).sort();
  if (learners.length === 0) return el('p', { class: 'muted' }, `v${v.version} has no metrics.`);
  const names = [...new Set(learners.flatMap((l) => Object.keys(v.metrics[l] || {})))].sort();
  return el('div', { class: 'metrics' }, el('h4', {}, `Metrics of v${v.version}`),
    table(['Learner'].concat(names), learners.map((l) => el('tr', { 'data-learner': l, class: l === v.selected ? 'selected' : '' },
      el('td', {}, l, l === v.selected ? el('span', { class: 'badge ok' }, 'selected') : null),
      names.map((n) => el('td', { class: 'num' }, fmtMetric(n, v.metrics[l][n])))))));
}

// fmtMetric reads a metric's unit from its name (mae_s, mae_bytes).
function fmtMetric(name, x) {
  if (!Number.isFinite(x)) return '–';
  if (name.endsWith('_s')) return fmtDuration(x);
  if (name.endsWith('_bytes')) return fmtBytes(x);
  const a = Math.abs(x);
  if (a === 0 || a >= 1000) return x.toFixed(0);
  if (a >= 10) return x.toFixed(1);
  return x.toPrecision(3);
}

// renderMode shows the mode and, to an admin only, the switch.
export function renderMode(mode) {
  const d = $('#mode-panel');
  d.dataset.mode = mode || '';
  $('#mode-value').textContent = mode || 'unknown';
  $('#mode-value').className = 'badge mode-' + (mode || 'unknown');
  $('#mode-says').textContent = MODE_SAYS[mode] || '';
  const other = mode === 'autopilot' ? 'advisor' : 'autopilot';
  const sw = $('#mode-switch');
  sw.hidden = !isAdmin() || !mode;
  sw.dataset.to = other;
  sw.textContent = `Switch to ${other}`;
  const note = $('#mode-note');
  note.hidden = isAdmin() || !session.identity;
  if (session.identity) note.textContent = `Only an admin may change the mode (this token is a ${session.identity.role} of tenant ${session.identity.tenant}).`;
}

async function switchMode() {
  const sw = $('#mode-switch');
  const to = sw.dataset.to;
  const ok = await confirmAction({
    title: `Switch to ${to}?`,
    message: MODE_SAYS[to] + (to === 'autopilot' ? ' Its next plan cycle acts on the fleet.' : ' Running jobs go on; nothing new is started for you.'),
    confirmLabel: `Switch to ${to}`, keepLabel: 'Keep the mode', danger: to === 'autopilot',
  });
  if (!ok) return;
  const out = $('#mode-result');
  sw.disabled = true;
  try {
    const res = await api('PUT', '/v1/mode', { mode: to });
    renderMode(res.mode);
    $('#mode').textContent = res.mode;
    out.className = 'ok';
    out.textContent = `The mode is now ${res.mode}.`;
    hooks.refresh();
  } catch (err) {
    if (err.status === 401) return;
    out.className = 'error';
    out.textContent = 'The mode did not change: ' + describeError(err);
  } finally {
    out.hidden = false;
    sw.disabled = false;
  }
}

export function setupModels() {
  $('#mode-switch').addEventListener('click', switchMode);
}
