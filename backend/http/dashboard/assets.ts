import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { ROI_JS } from './roi-assets.js';

/**
 * Scripts of the Reports page, served by Capigram itself (no CDN): Chart.js from its npm package,
 * read once at start, and the page's own script that draws the charts from the page's JSON data
 * block. Chart.js needs no eval and sets its canvas sizes through the CSSOM, so the page's
 * Content-Security-Policy stays `script-src 'self'` with no inline script or style attribute.
 */
const chartJsPath = join(dirname(createRequire(import.meta.url).resolve('chart.js')), 'chart.umd.min.js');

let chartJs: string | null = null;
function chartJsSource(): string {
  chartJs ??= readFileSync(chartJsPath, 'utf8');
  return chartJs;
}

const REPORTS_JS = `'use strict';
(function () {
  var block = document.getElementById('report-data');
  if (!block || typeof Chart === 'undefined') return;
  var d = JSON.parse(block.textContent);
  var colors = { visits: '#4c6ef5', inviteClicks: '#15aabf', joins: '#37b24d', retained: '#94d82d', conversions: '#f59f00' };
  var line = function (label, key) {
    return { label: label, data: d[key], borderColor: colors[key], backgroundColor: colors[key], tension: 0.25, pointRadius: d.days.length > 45 ? 0 : 2 };
  };
  new Chart(document.getElementById('chart-days'), {
    type: 'line',
    data: { labels: d.days, datasets: [line('visits', 'visits'), line('invite clicks', 'inviteClicks'), line('joins', 'joins'), line('conversions', 'conversions')] },
    options: { responsive: true, maintainAspectRatio: false, animation: false, interaction: { mode: 'index', intersect: false },
      scales: { y: { beginAtZero: true, ticks: { precision: 0 } } }, plugins: { title: { display: true, text: 'By day (UTC)' } } }
  });
  var steps = [['visits', 'visits'], ['invite clicks', 'inviteClicks'], ['joins', 'joins'], ['still members', 'retained'], ['conversions', 'conversions']];
  new Chart(document.getElementById('chart-funnel'), {
    type: 'bar',
    data: { labels: steps.map(function (s) { return s[0]; }),
      datasets: [{ label: 'funnel', data: steps.map(function (s) { return d.funnel[s[1]]; }), backgroundColor: steps.map(function (s) { return colors[s[1]]; }) }] },
    options: { indexAxis: 'y', responsive: true, maintainAspectRatio: false, animation: false,
      scales: { x: { beginAtZero: true, ticks: { precision: 0 } } }, plugins: { legend: { display: false }, title: { display: true, text: 'Funnel' } } }
  });
})();
`;

export const DASHBOARD_ASSETS: Record<string, () => string> = {
  'chart.umd.min.js': chartJsSource,
  'reports.js': () => REPORTS_JS,
  'roi.js': () => ROI_JS,
};
