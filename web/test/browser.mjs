// The explainer in a real browser: headless Chromium driven over WebDriver (chromedriver) with
// Node's own fetch, so the test needs no npm package. It serves web/ (after web/build.sh) on a
// local port, loads two bundled recorded cycles from the page's example list, checks every
// pod's node and every node's Filter code and reason against the scenario's expected.json and,
// when given the CLI, against `sharing-affinity replay --output json` and the report `replay
// --output html` writes (same view), checks the grid and the lock table, prints the bundle sizes and the time from navigation to ready, and saves a
// screenshot (docs/img/explainer.png).
//
//   node web/test/browser.mjs [--cli target/release/sharing-affinity] [--screenshot FILE]
import { spawn, execFileSync } from "node:child_process";
import { createServer } from "node:http";
import { readFileSync, writeFileSync, existsSync, statSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { join, extname, dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const web = join(root, "web");
const args = process.argv.slice(2);
const option = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const cli = option("--cli", null);
const screenshot = option("--screenshot", join(root, "docs/img/explainer.png"));
const chromium = process.env.CHROMIUM ?? "/usr/bin/chromium";
const chromedriver = process.env.CHROMEDRIVER ?? "/usr/bin/chromedriver";
const SCENARIOS = ["nic-subnet-16-slots-17th-opens-eth2", "pod-fits-nowhere-lock-conflict-and-full"];

if (!existsSync(join(web, "pkg/sharing_affinity_web_bg.wasm"))) {
  throw new Error("web/pkg is missing: run web/build.sh first");
}

// The page's files, with the MIME types a browser needs (application/wasm for streaming).
const TYPES = { ".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".json": "application/json", ".wasm": "application/wasm" };
const server = createServer((req, res) => {
  const path = join(web, decodeURIComponent(new URL(req.url, "http://x").pathname));
  if (!path.startsWith(web) || !existsSync(path) || statSync(path).isDirectory()) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { "content-type": TYPES[extname(path)] ?? "application/octet-stream" });
  res.end(readFileSync(path));
});
await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
const site = `http://127.0.0.1:${server.address().port}`;

const driverPort = 9515 + Math.floor(Math.random() * 1000);
const driver = spawn(chromedriver, [`--port=${driverPort}`], { stdio: "ignore" });
const wd = `http://127.0.0.1:${driverPort}`;
let session = null;
let failures = 0;

async function call(method, path, body) {
  const res = await fetch(wd + path, { method, headers: { "content-type": "application/json" }, body: body && JSON.stringify(body) });
  const json = await res.json();
  if (!res.ok) throw new Error(`${method} ${path}: ${JSON.stringify(json.value)}`);
  return json.value;
}
const exec = (script, ...a) => call("POST", `/session/${session}/execute/sync`, { script, args: a });
async function until(what, script, timeoutMs = 20000) {
  const start = Date.now();
  for (;;) {
    const v = await exec(script);
    if (v) return v;
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
const EXTRACT = `
      const out = document.getElementById("out");
      const pods = [];
      for (const tr of out.querySelectorAll("tr.pod")) {
        tr.click();
        const nodes = [...out.querySelectorAll("#pod table.filter tr[data-node]")].map((r) => ({
          node: r.dataset.node, code: r.querySelector(".code").textContent, reason: r.querySelector(".reason").textContent }));
        const cells = [...out.querySelectorAll("#pod table.grid td.cell")].map((c) => c.dataset.outcome);
        pods.push({ pod: tr.dataset.pod, node: tr.dataset.node || null, nodes, cells });
      }
      return { pods, state: document.getElementById("state")?.textContent, elapsed: performance.now() - arguments[0],
        locks: [...out.querySelectorAll("#locks tr[data-device]")].map((r) => r.textContent) };`;
const strip = (pods) => pods.map((p) => ({ pod: p.pod, node: p.node, nodes: p.nodes.map((n) => ({ node: n.node, code: n.code, reason: n.reason })) }));

function check(ok, message) {
  if (!ok) {
    failures++;
    console.log(`FAIL ${message}`);
  }
}

try {
  for (let i = 0; ; i++) {
    try { await call("GET", "/status"); break; } catch (e) {
      if (i > 100) throw new Error(`chromedriver did not start: ${e.message}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  session = (await call("POST", "/session", {
    capabilities: { alwaysMatch: { "goog:chromeOptions": {
      binary: chromium,
      args: ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1500"],
    } } },
  })).sessionId;

  await call("POST", `/session/${session}/url`, { url: `${site}/index.html` });
  const ready = Number(await until("the page to be ready", "return document.body.dataset.ready"));
  console.log(`page ready ${ready.toFixed(1)} ms after navigation (wasm fetched, compiled, instantiated; example list read)`);

  for (const name of SCENARIOS) {
    const expected = JSON.parse(readFileSync(join(root, "testdata", name, "expected.json"), "utf8"));
    const t0 = await exec(`
      const s = document.getElementById("example");
      delete document.getElementById("out").dataset.rendered;
      s.value = arguments[0];
      s.dispatchEvent(new Event("change"));
      return performance.now();`, name);
    await until(`${name} to render`, "return document.getElementById('out').dataset.rendered");
    const shown = await exec(EXTRACT, t0);
    const want = JSON.stringify(strip(expected.pods));
    check(JSON.stringify(strip(shown.pods)) === want, `${name}: the page's decisions and reasons differ from expected.json:\n${JSON.stringify(strip(shown.pods), null, 1)}`);
    if (cli) {
      const replay = JSON.parse(execFileSync(cli, ["replay", join(root, "testdata", name), "--engine", "native", "--output", "json"], { encoding: "utf8" }));
      check(JSON.stringify(strip(shown.pods)) === JSON.stringify(strip(replay.pods)), `${name}: the page and sharing-affinity replay differ`);
    }
    check(shown.pods.every((p) => p.cells.length > 0), `${name}: every pod has a grid`);
    check(shown.pods.every((p) => !p.node || p.cells.includes("chosen")), `${name}: a bound pod's grid shows its device`);
    check(shown.locks.length > 0, `${name}: the lock table lists the shareable devices`);
    const bound = shown.pods.filter((p) => p.node).length;
    console.log(`${name}: ${shown.pods.length} pods (${bound} bound), ${shown.pods.reduce((n, p) => n + p.nodes.length, 0)} node reasons` +
      ` as expected.json${cli ? " and the CLI" : ""} say; example loaded, explained, rendered and every pod clicked in ${shown.elapsed.toFixed(1)} ms (${shown.state})`);
  }

  // The report `replay --output html` writes: the same view of the same explanation, no wasm.
  if (cli) {
    const name = SCENARIOS[1];
    const report = join(root, "target", "explainer-report.html");
    writeFileSync(report, execFileSync(cli, ["replay", join(root, "testdata", name), "--output", "html"]));
    const page = strip((await exec(EXTRACT, 0)).pods);
    await call("POST", `/session/${session}/url`, { url: `file://${report}` });
    await until("the report to render", "return document.getElementById('out').dataset.rendered");
    const inReport = await exec(EXTRACT, 0);
    check(JSON.stringify(strip(inReport.pods)) === JSON.stringify(page), `${name}: the HTML report and the page differ`);
    check(inReport.pods.every((p) => p.cells.length > 0) && inReport.locks.length > 0, `${name}: the report has grids and locks`);
    console.log(`${name}: replay --output html shows the page's ${inReport.pods.length} pods, reasons, grids and locks`);
    await call("POST", `/session/${session}/url`, { url: `${site}/index.html` });
    await until("the page to be ready", "return document.body.dataset.ready");
    await exec(`const s = document.getElementById("example"); s.value = arguments[0]; s.dispatchEvent(new Event("change"));`, name);
    await until(`${name} to render`, "return document.getElementById('out').dataset.rendered");
  }

  // The screenshot: the second scenario, its pending pod chosen (lock conflict and a full device).
  await exec(`document.querySelector('tr.pod[data-pod="team/orphan"]').click(); window.scrollTo(0, 0);`);
  const png = await call("GET", `/session/${session}/screenshot`);
  writeFileSync(screenshot, Buffer.from(png, "base64"));
  console.log(`screenshot: ${screenshot}`);

  const size = (f) => readFileSync(join(web, f));
  for (const f of ["pkg/sharing_affinity_web_bg.wasm", "pkg/sharing_affinity_web.js", "view.js", "app.js", "view.css", "index.html"]) {
    const b = size(f);
    console.log(`bundle ${f}: ${b.length} bytes, ${gzipSync(b, { level: 9 }).length} gzip -9`);
  }
} finally {
  if (session) await call("DELETE", `/session/${session}`).catch(() => {});
  driver.kill();
  server.close();
}
if (failures) {
  console.log(`browser test: ${failures} failure(s)`);
  process.exit(1);
}
console.log("browser test: ok");
