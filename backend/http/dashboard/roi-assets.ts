/**
 * The ROI page's script: draws its two charts from the page's JSON data block with Chart.js (served
 * with the Reports page's assets). One series per currency: amounts in different currencies are
 * never drawn as one.
 */
export const ROI_JS = `'use strict';
(function () {
  var block = document.getElementById('roi-data');
  if (!block || typeof Chart === 'undefined') return;
  var d = JSON.parse(block.textContent);
  var palette = ['#4c6ef5', '#f59f00', '#15aabf', '#ae3ec9', '#e8590c', '#5c940d'];
  var datasets = [];
  Object.keys(d.spend).forEach(function (c, i) {
    datasets.push({ type: 'bar', label: 'spend ' + c, data: d.spend[c], backgroundColor: palette[i % palette.length], yAxisID: 'money', stack: 'spend ' + c });
  });
  Object.keys(d.value).forEach(function (c, i) {
    datasets.push({ type: 'line', label: 'value ' + c, data: d.value[c], borderColor: palette[(i + 3) % palette.length], backgroundColor: palette[(i + 3) % palette.length], yAxisID: 'money', tension: 0.25, pointRadius: d.days.length > 45 ? 0 : 2 });
  });
  datasets.push({ type: 'line', label: 'joins', data: d.joins, borderColor: '#37b24d', backgroundColor: '#37b24d', yAxisID: 'count', tension: 0.25, pointRadius: d.days.length > 45 ? 0 : 2 });
  new Chart(document.getElementById('chart-spend'), {
    data: { labels: d.days, datasets: datasets },
    options: { responsive: true, maintainAspectRatio: false, animation: false, interaction: { mode: 'index', intersect: false },
      scales: { money: { position: 'left', beginAtZero: true }, count: { position: 'right', beginAtZero: true, ticks: { precision: 0 }, grid: { drawOnChartArea: false } } },
      plugins: { title: { display: true, text: 'Spend and value per currency, joins, by day' } } }
  });
  new Chart(document.getElementById('chart-cost'), {
    type: 'bar',
    data: { labels: d.campaigns, datasets: Object.keys(d.costPerJoin).map(function (c, i) {
      return { label: 'cost per join ' + c, data: d.costPerJoin[c], backgroundColor: palette[i % palette.length] };
    }) },
    options: { indexAxis: 'y', responsive: true, maintainAspectRatio: false, animation: false,
      scales: { x: { beginAtZero: true } }, plugins: { title: { display: true, text: 'Cost per join, campaigns with the most joins' } } }
  });
})();
`;
