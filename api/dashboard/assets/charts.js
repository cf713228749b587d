// Inline SVG charts for the dashboard: a time-series line chart, horizontal
// bars and a forecast-against-actual scatter. Each draws into a container
// element, replacing what was there, and sets the container's data-points
// attribute to the number of data points drawn (the browser tests read it).
'use strict';

(function () {
  const NS = 'http://www.w3.org/2000/svg';
  const H = 220, PAD = { left: 52, right: 12, top: 12, bottom: 28 };
  // W is the width of the chart being drawn: its container's, so that text keeps its size.
  let W = 640;

  function svgEl(tag, attrs, text) {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function root(container, height) {
    W = Math.max(320, Math.round(container.clientWidth || 640));
    container.replaceChildren();
    const svg = svgEl('svg', { viewBox: `0 0 ${W} ${height}`, role: 'img', preserveAspectRatio: 'xMidYMid meet' });
    container.appendChild(svg);
    return svg;
  }

  function empty(container, message) {
    container.replaceChildren();
    const p = document.createElement('p');
    p.className = 'muted empty';
    p.textContent = message;
    container.appendChild(p);
    container.dataset.points = '0';
  }

  // niceMax rounds v up to 1, 2 or 5 times a power of ten.
  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
    return 10 * p;
  }

  function fmtTick(v) {
    if (Math.abs(v) >= 1000) return (v / 1000).toFixed(v % 1000 === 0 ? 0 : 1) + 'k';
    return Number.isInteger(v) ? String(v) : v.toFixed(1);
  }

  // timeTick is a tick's time in UTC: hours and minutes, with the date when the span is over a day.
  function timeTick(ms, spanMs) {
    const iso = new Date(ms).toISOString();
    return (spanMs > 86400000 ? iso.slice(5, 10) + ' ' : '') + iso.slice(11, 16) + ' UTC';
  }

  function yAxis(svg, max, height, unit) {
    const plotH = height - PAD.top - PAD.bottom;
    for (let i = 0; i <= 4; i++) {
      const v = (max * i) / 4;
      const y = PAD.top + plotH - (plotH * i) / 4;
      svg.appendChild(svgEl('line', { x1: PAD.left, x2: W - PAD.right, y1: y, y2: y, class: 'grid' }));
      svg.appendChild(svgEl('text', { x: PAD.left - 6, y: y + 4, class: 'tick', 'text-anchor': 'end' }, fmtTick(v)));
    }
    if (unit) svg.appendChild(svgEl('text', { x: 4, y: PAD.top + 8, class: 'unit' }, unit));
  }

  // line draws series over time. series: [{name, cls, unit, values: [{t: Date|string, v: number}]}],
  // all on one y axis starting at 0 (opts.max fixes its top, e.g. 100 for percentages).
  function line(container, series, opts) {
    opts = opts || {};
    const pts = series.flatMap((s) => s.values.filter((p) => Number.isFinite(p.v)));
    if (pts.length === 0) return empty(container, opts.emptyText || 'No data in this window yet.');
    const times = pts.map((p) => new Date(p.t).getTime());
    let t0 = Math.min(...times), t1 = Math.max(...times);
    if (t1 === t0) { t0 -= 30000; t1 += 30000; }
    const max = opts.max || niceMax(Math.max(...pts.map((p) => p.v)));
    const svg = root(container, H);
    const plotW = W - PAD.left - PAD.right, plotH = H - PAD.top - PAD.bottom;
    const x = (t) => PAD.left + ((new Date(t).getTime() - t0) / (t1 - t0)) * plotW;
    const y = (v) => PAD.top + plotH - (Math.min(v, max) / max) * plotH;
    yAxis(svg, max, H, opts.unit);
    for (const [t, anchor] of [[t0, 'start'], [(t0 + t1) / 2, 'middle'], [t1, 'end']]) {
      svg.appendChild(svgEl('text', { x: x(t), y: H - 8, class: 'tick', 'text-anchor': anchor }, timeTick(t, t1 - t0)));
    }
    let n = 0;
    series.forEach((s, i) => {
      const vals = s.values.filter((p) => Number.isFinite(p.v));
      if (vals.length === 0) return;
      const g = svgEl('g', { class: 'series ' + (s.cls || 's' + i) });
      g.appendChild(svgEl('polyline', { points: vals.map((p) => `${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(' ') }));
      for (const p of vals) {
        const c = svgEl('circle', { class: 'point', cx: x(p.t).toFixed(1), cy: y(p.v).toFixed(1), r: 2.5 });
        c.appendChild(svgEl('title', {}, `${s.name}: ${fmtTick(p.v)}${s.unit || ''} at ${new Date(p.t).toISOString()}`));
        g.appendChild(c);
        n++;
      }
      svg.appendChild(g);
      svg.appendChild(svgEl('text', { x: PAD.left + 8 + i * 160, y: PAD.top + 10, class: 'legend ' + (s.cls || 's' + i) }, s.name));
    });
    container.dataset.points = String(n);
  }

  // bars draws one horizontal bar per row: rows [{label, value, marker, title}], value and marker in one unit.
  function bars(container, rows, opts) {
    opts = opts || {};
    if (rows.length === 0) return empty(container, opts.emptyText || 'Nothing to show yet.');
    const rowH = 22, height = PAD.top + rows.length * rowH + 8;
    const max = niceMax(Math.max(...rows.map((r) => Math.max(r.value, r.marker || 0))));
    const svg = root(container, height);
    const left = 110, right = 150, plotW = W - left - right;
    rows.forEach((r, i) => {
      const y = PAD.top + i * rowH;
      const g = svgEl('g', { class: 'bar-row', 'data-key': r.label });
      g.appendChild(svgEl('text', { x: left - 6, y: y + 14, class: 'tick', 'text-anchor': 'end' }, r.label));
      g.appendChild(svgEl('rect', { class: 'bar', x: left, y: y + 3, height: rowH - 8, width: Math.max(1, (r.value / max) * plotW).toFixed(1) }));
      if (r.marker) {
        const mx = left + (r.marker / max) * plotW;
        g.appendChild(svgEl('line', { class: 'marker', x1: mx, x2: mx, y1: y + 1, y2: y + rowH - 3 }));
      }
      g.appendChild(svgEl('text', { x: W - right + 6, y: y + 14, class: 'tick' }, r.text || fmtTick(r.value)));
      if (r.title) g.appendChild(svgEl('title', {}, r.title));
      svg.appendChild(g);
    });
    container.dataset.points = String(rows.length);
  }

  // scatter draws forecast against actual: points [{label, actual, p50, p90}] in one unit;
  // the diagonal is a perfect forecast, the whisker reaches up to P90.
  function scatter(container, points, opts) {
    opts = opts || {};
    if (points.length === 0) return empty(container, opts.emptyText || 'No finished job with a forecast yet.');
    const max = niceMax(Math.max(...points.flatMap((p) => [p.actual, p.p50, p.p90 || 0])));
    const height = 260, svg = root(container, height);
    const plotW = W - PAD.left - PAD.right, plotH = height - PAD.top - PAD.bottom;
    const x = (v) => PAD.left + (Math.min(v, max) / max) * plotW;
    const y = (v) => PAD.top + plotH - (Math.min(v, max) / max) * plotH;
    yAxis(svg, max, height, opts.unit);
    svg.appendChild(svgEl('text', { x: PAD.left + 8, y: PAD.top + 10, class: 'legend' }, 'forecast P50, whisker to P90; dashed: perfect'));
    svg.appendChild(svgEl('line', { class: 'diagonal', x1: x(0), y1: y(0), x2: x(max), y2: y(max) }));
    svg.appendChild(svgEl('text', { x: W - PAD.right, y: height - 8, class: 'tick', 'text-anchor': 'end' },
      'actual ' + (opts.unit || '') + ' (0 to ' + fmtTick(max) + ')'));
    for (const p of points) {
      const g = svgEl('g', { class: 'forecast-point' });
      if (p.p90) g.appendChild(svgEl('line', { class: 'whisker', x1: x(p.actual), x2: x(p.actual), y1: y(p.p50), y2: y(p.p90) }));
      const c = svgEl('circle', { class: 'point', cx: x(p.actual).toFixed(1), cy: y(p.p50).toFixed(1), r: 3.5 });
      c.appendChild(svgEl('title', {}, p.title || p.label));
      g.appendChild(c);
      svg.appendChild(g);
    }
    container.dataset.points = String(points.length);
  }

  window.Charts = { line, bars, scatter };
})();
