// The fleet panel (GET /v1/fleet): one tile per GPU for a small fleet;
// above AGGREGATE_ABOVE GPUs one row per node (GPUs allocated of its
// total, mean utilization, power, model, jobs, a strip of its GPUs), which
// a click expands into that node's GPU tiles.

import { $, el, fmtNum, fmtBytes } from './core.js';

// AGGREGATE_ABOVE is the fleet size (GPUs) above which the panel shows
// nodes rather than GPUs: some 32 nodes of 8 still read as tiles; 1,000
// GPUs as tiles are 60 screens of scrolling.
export const AGGREGATE_ABOVE = 256;

// An inference node's loan to training (serve --lend-pools), as its badge says it.
const LOAN = { serving: 'inference', lent: 'lent to training', returning: 'returning to inference' };

const expanded = new Set(); // nodes whose GPUs the aggregated view shows

export function renderFleet(f) {
  const began = performance.now();
  const nodes = (f && f.nodes) || [];
  const box = $('#fleet');
  if (nodes.length === 0) {
    box.dataset.view = 'empty';
    box.replaceChildren(el('p', { class: 'muted' }, 'No nodes registered.'));
  } else if ((f.gpus || 0) > AGGREGATE_ABOVE) {
    box.dataset.view = 'nodes';
    // The table scrolls in its own box; a redraw keeps where it was.
    const old = box.querySelector('.fleet-scroll');
    const scrolled = old ? old.scrollTop : 0;
    const scroller = el('div', { class: 'fleet-scroll' }, table(nodes));
    box.replaceChildren(
      el('p', { class: 'muted' }, `${nodes.length} nodes, ${f.gpus} GPUs: one row per node. Click a node to see its GPUs.`),
      scroller);
    scroller.scrollTop = scrolled;
  } else {
    box.dataset.view = 'gpus';
    box.replaceChildren(...nodes.map((n) =>
      el('div', { class: 'node state-' + n.state, 'data-node': n.name }, nodeHead('h3', n),
        el('div', { class: 'gpus' }, (n.gpus || []).map((g) => gpuTile(n.name, g))))));
  }
  box.dataset.renderMs = (performance.now() - began).toFixed(1);
}

function nodeHead(tag, n) {
  return el(tag, {}, n.name, ' ', el('span', { class: 'badge' }, n.state), n.agent ? el('span', { class: 'badge ok' }, 'agent') : null,
    n.loan ? el('span', { class: 'badge loan loan-' + n.loan.state, title: 'inference pool ' + n.loan.pool }, LOAN[n.loan.state] || n.loan.state) : null);
}

// summary is what the node's row says of its GPUs.
function summary(n) {
  const gpus = n.gpus || [];
  let milli = 0, utilSum = 0, utilN = 0, powerW = 0, powerN = 0;
  const models = new Map(), jobs = new Set();
  for (const g of gpus) {
    milli += Math.min(1000, g.allocated_milli || 0);
    if (Number.isFinite(g.utilization_pct)) { utilSum += g.utilization_pct; utilN++; }
    if (Number.isFinite(g.power_w)) { powerW += g.power_w; powerN++; }
    if (g.model) models.set(g.model, (models.get(g.model) || 0) + 1);
    for (const j of g.jobs || []) jobs.add(j);
  }
  return {
    gpus: gpus.length, allocated: milli / 1000, util: utilN ? utilSum / utilN : NaN, utilN, powerW: powerN ? powerW : NaN,
    models: [...models].map(([m, c]) => (models.size > 1 ? `${c}× ${m}` : m)).join(', '), jobs: [...jobs].sort(),
  };
}

function table(nodes) {
  const rows = [];
  for (const n of nodes) {
    const s = summary(n);
    const open = expanded.has(n.name);
    rows.push(el('tr', { class: 'node-row node state-' + n.state + (open ? ' open' : ''), 'data-node': n.name, 'aria-expanded': String(open) },
      el('td', {}, el('button', { type: 'button', class: 'link expand', 'data-expand': n.name, title: (open ? 'Hide' : 'Show') + ' the GPUs of ' + n.name },
        open ? '▾ ' : '▸ ', n.name)),
      el('td', {}, el('span', { class: 'badge' }, n.state), n.agent ? el('span', { class: 'badge ok' }, 'agent') : null,
        n.loan ? el('span', { class: 'badge loan loan-' + n.loan.state, title: 'inference pool ' + n.loan.pool }, LOAN[n.loan.state] || n.loan.state) : null),
      el('td', { class: 'model' }, s.models || '–'),
      el('td', { class: 'num allocated' }, `${fmtNum(s.allocated, s.allocated % 1 ? 1 : 0)} / ${s.gpus}`),
      el('td', {}, strip(n)),
      el('td', { class: 'num util' }, s.utilN ? `${fmtNum(s.util, 0)} %` : '–'),
      el('td', { class: 'num' }, Number.isFinite(s.powerW) ? `${fmtNum(s.powerW / 1000, 2)} kW` : '–'),
      el('td', { class: 'node-jobs' }, s.jobs.length ? `${s.jobs.length} job${s.jobs.length > 1 ? 's' : ''}` : '–')));
    if (open) {
      rows.push(el('tr', { class: 'node-gpus', 'data-node-gpus': n.name },
        el('td', { colSpan: 8 }, el('div', { class: 'gpus' }, (n.gpus || []).map((g) => gpuTile(n.name, g))))));
    }
  }
  const t = el('table', { class: 'fleet-nodes clickable' },
    el('thead', {}, el('tr', {}, ['Node', 'State', 'Model', 'GPUs allocated', 'GPUs', 'Mean utilization', 'Power', 'Jobs'].map((h) => el('th', {}, h)))),
    el('tbody', {}, rows));
  return t;
}

// strip is one small cell per GPU, filled as far as it is allocated.
function strip(n) {
  return el('div', { class: 'strip' }, (n.gpus || []).map((g) => {
    const a = Math.min(1000, g.allocated_milli || 0);
    return el('span', {
      class: 'cell ' + (a >= 1000 ? 'full' : a > 0 ? 'part' : 'free'),
      title: `gpu${g.index}: ${a / 10}% allocated` + (Number.isFinite(g.utilization_pct) ? `, util ${fmtNum(g.utilization_pct, 0)}%` : ''),
    });
  }));
}

export function gpuTile(node, g) {
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

// setupFleet makes a node's row expand and collapse; onJob opens a job
// shown on a GPU.
export function setupFleet(rerender, onJob) {
  $('#fleet').addEventListener('click', (ev) => {
    const t = ev.target instanceof Element ? ev.target : null;
    if (!t) return;
    const job = t.closest('.gpu-job[data-job-id]');
    if (job) {
      onJob(job.dataset.jobId, job);
      return;
    }
    const row = t.closest('tr.node-row[data-node]');
    if (!row) return;
    const name = row.dataset.node;
    if (expanded.has(name)) expanded.delete(name);
    else expanded.add(name);
    rerender();
    const again = document.querySelector(`#fleet [data-expand="${CSS.escape(name)}"]`);
    if (again) again.focus();
  });
}
