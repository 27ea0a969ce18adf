// The explainer page: loads the wasm-bindgen output (pkg/, built by web/build.sh) and renders
// explain()'s JSON. No framework, no network beyond this page's own files.
import init, { explain } from "./pkg/sharing_affinity_web.js";

const $ = (id) => document.getElementById(id);
const esc = (s) => String(s ?? "").replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);

export function render(result) {
  if (result.error) return `<p class="Error">${esc(result.error)}</p>`;
  let html = "<h2>Pending pods</h2><table><tr><th>pod</th><th>node</th><th>status</th><th>reason</th></tr>";
  for (const p of result.pods) {
    html += `<tr class="${esc(p.status)}" data-pod="${esc(p.pod)}"><td>${esc(p.pod)}</td>` +
      `<td class="node">${esc(p.node ?? "")}</td><td>${esc(p.status)}</td><td>${esc(p.reason)}</td></tr>`;
  }
  html += "</table><h2>Filter per node</h2>";
  for (const p of result.pods) {
    if (!p.filter.length) continue;
    html += `<h3>${esc(p.pod)}</h3><table><tr><th>node</th><th>code</th><th>reason</th></tr>`;
    for (const f of p.filter) {
      html += `<tr class="${esc(f.code)}"><td>${esc(f.node)}</td><td>${esc(f.code)}</td><td>${esc(f.reason)}</td></tr>`;
    }
    html += "</table>";
  }
  for (const [title, list] of [["Rejected objects", result.rejected], ["Warnings", result.warnings]]) {
    if (list && list.length) html += `<h2>${title}</h2><ul>${list.map((x) => `<li>${esc(x)}</li>`).join("")}</ul>`;
  }
  return html;
}

function run() {
  const t0 = performance.now();
  const result = JSON.parse(explain($("cluster").value, $("config").value));
  $("out").innerHTML = render(result);
  $("state").textContent = `explained in ${(performance.now() - t0).toFixed(1)} ms`;
}

for (const id of ["cluster", "config"]) {
  const el = $(id);
  el.addEventListener("dragover", (e) => e.preventDefault());
  el.addEventListener("drop", async (e) => {
    e.preventDefault();
    el.value = await e.dataTransfer.files[0].text();
  });
}

const t0 = performance.now();
await init();
window.saExplain = explain;
$("state").textContent = `ready (wasm loaded in ${(performance.now() - t0).toFixed(1)} ms)`;
$("run").addEventListener("click", run);
