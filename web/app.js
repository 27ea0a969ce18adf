// The explainer page: loads the plugin (pkg/, built by web/build.sh), reads the pasted, dropped
// or example cluster and renders its explanation with view.js. Only this page's own files are
// fetched; the cluster never leaves the browser.
import init, { explain, grid } from "./pkg/sharing_affinity_web.js";

const $ = (id) => document.getElementById(id);

function run() {
  const cluster = $("cluster").value;
  const config = $("config").value;
  const t0 = performance.now();
  const doc = JSON.parse(explain(cluster, config));
  SaView.render(doc, $("out"), (pod) => JSON.parse(grid(cluster, config, pod)));
  $("state").textContent = `explained in ${(performance.now() - t0).toFixed(1)} ms`;
}

async function loadExample(name, hasConfig) {
  const base = `pkg/examples/${encodeURIComponent(name)}/`;
  $("cluster").value = await (await fetch(base + "cluster.json")).text();
  $("config").value = hasConfig ? await (await fetch(base + "config.json")).text() : "";
  run();
}

for (const id of ["cluster", "config"]) {
  const el = $(id);
  el.addEventListener("dragover", (e) => e.preventDefault());
  el.addEventListener("drop", async (e) => {
    e.preventDefault();
    el.value = await e.dataTransfer.files[0].text();
  });
}

await init();
const examples = await fetch("pkg/examples/index.json").then((r) => r.json()).catch(() => []);
for (const ex of examples) {
  const option = document.createElement("option");
  option.value = ex.name;
  option.textContent = ex.name;
  option.dataset.config = ex.config;
  $("example").append(option);
}
$("example").addEventListener("change", (e) => {
  const option = e.target.selectedOptions[0];
  if (option.value) loadExample(option.value, option.dataset.config === "true");
});
$("run").addEventListener("click", run);
// Navigation to ready: performance.now() counts from the navigation's start.
const ready = performance.now();
document.body.dataset.ready = ready.toFixed(1);
$("state").textContent = `ready in ${ready.toFixed(0)} ms`;
