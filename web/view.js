// Renders an explanation (sharing-affinity-replay's explain::Explanation, as JSON) into an
// element. Shared by the page (index.html, with the plugin in WebAssembly) and the report that
// `sharing-affinity replay --output html` writes (the explanation inlined): one view for both.
// A classic script without a framework: it defines the global SaView.
"use strict";
var SaView = (function () {
  const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  const OUTCOMES = [
    ["chosen", "allocated by Bind"],
    ["fits", "fits"],
    ["lock", "locked to other values"],
    ["unreconstructable", "lock unreconstructable"],
    ["affinity", "no affinity value"],
    ["capacity", "capacity"],
    ["in-use", "dedicated, in use"],
    ["taint", "taint not tolerated"],
    ["selector", "selector does not match"],
    ["other", "other"],
  ];

  function podsTable(doc) {
    let html = "<table id=\"pods\"><tr><th>pod</th><th>node</th><th>what the scheduler says</th></tr>";
    for (const p of doc.pods) {
      const cls = p.node ? "Success" : "Unschedulable";
      html += `<tr class="pod ${cls}" data-pod="${esc(p.pod)}" data-node="${esc(p.node ?? "")}">` +
        `<td>${esc(p.pod)}</td><td class="node">${esc(p.node ?? "pending")}</td><td>${esc(p.message)}</td></tr>`;
    }
    return html + "</table>";
  }

  function filterTable(p) {
    let html = "<table class=\"filter\"><tr><th>node</th><th>code</th><th>reason</th><th>score</th></tr>";
    for (const n of p.nodes) {
      html += `<tr class="${esc(n.code)}" data-node="${esc(n.node)}"><td>${esc(n.node)}</td><td class="code">${esc(n.code)}</td>` +
        `<td class="reason">${esc(n.reason)}</td><td>${esc(n.score ?? "")}</td></tr>`;
    }
    return html + "</table>";
  }

  function gridTable(g) {
    if (g.error) return `<p class="Error">${esc(g.error)}</p>`;
    let html = `<p>Requests probed: ${g.requests.length ? esc(g.requests.join(", ")) : "none"}.` +
      (g.note ? ` ${esc(g.note)}.` : "") + " Hover a cell for the reason per request.</p>";
    html += "<table class=\"grid\"><tr><th>node</th><th>Filter</th>" +
      g.columns.map((c) => `<th>${esc(c)}</th>`).join("") + "</tr>";
    for (const r of g.rows) {
      html += `<tr data-node="${esc(r.node)}"><td>${esc(r.node)}</td><td class="${esc(r.code)}">${esc(r.code)}</td>`;
      for (const c of r.cells) {
        html += c
          ? `<td class="cell o-${esc(c.outcome)}" data-device="${esc(c.device)}" data-outcome="${esc(c.outcome)}" ` +
            `title="${esc(c.device + "\n" + c.detail.join("\n"))}">${esc(c.outcome)}</td>`
          : "<td></td>";
      }
      html += "</tr>";
    }
    html += "</table><p class=\"legend\">" +
      OUTCOMES.map(([o, label]) => `<span class="o-${o}">${esc(label)}</span>`).join("") + "</p>";
    return html;
  }

  function lockCell(l) {
    const values = l.values ? ` ${esc(l.values)}` : "";
    const holders = l.holders.length ? `<br>held by ${esc(l.holders.join(", "))}` : "";
    return `<td><span class="state-${esc(l.state)}">${esc(l.state)}</span>${values}${holders}</td>`;
  }

  function locksTable(doc) {
    if (!doc.locks.length) return "<p>No device allows multiple allocations.</p>";
    let html = "<table id=\"locks\"><tr><th>shareable device</th><th>node</th><th>recorded</th><th>after the replay</th></tr>";
    for (const l of doc.locks) {
      html += `<tr data-device="${esc(l.device)}"><td>${esc(l.device)}</td><td>${esc(l.node ?? "")}</td>` +
        lockCell(l.recorded) + lockCell(l.replayed) + "</tr>";
    }
    return html + "</table>";
  }

  function lists(doc) {
    let html = "";
    for (const [title, list] of [["Rejected objects", doc.rejected], ["Plugin warnings", doc.warnings]]) {
      if (list && list.length) html += `<h2>${title}</h2><ul>${list.map((x) => `<li>${esc(x)}</li>`).join("")}</ul>`;
    }
    return html;
  }

  function showPod(doc, root, pod, gridFor) {
    const p = doc.pods.find((x) => x.pod === pod);
    for (const tr of root.querySelectorAll("tr.pod")) tr.classList.toggle("selected", tr.dataset.pod === pod);
    const g = doc.grids[pod] ?? (gridFor ? gridFor(pod) : { error: "no grid for this pod in this report" });
    let html = `<h2>${esc(pod)}</h2><p class="message">${esc(p.message)}</p>`;
    if (p.allocations.length) html += `<p>Allocated: ${esc(p.allocations.join("; "))}</p>`;
    if (p.deallocated) html += `<p>PostFilter deallocated ${esc(p.deallocated)}.</p>`;
    html += "<h3>Devices (node × device)</h3>" + gridTable(g) + "<h3>Filter per node</h3>" + filterTable(p);
    root.querySelector("#pod").innerHTML = html;
    root.dataset.pod = pod;
  }

  /** Renders `doc` into `root`; `gridFor(pod)` supplies the grid of a pod `doc.grids` lacks. */
  function render(doc, root, gridFor) {
    if (doc.error) {
      root.innerHTML = `<p class="Error">${esc(doc.error)}</p>`;
      return;
    }
    const bound = doc.pods.filter((p) => p.node).length;
    root.innerHTML = `<h2>Pending pods</h2><p>${doc.pods.length} pending pods on ${doc.nodes.length} nodes: ` +
      `${bound} bound, ${doc.pods.length - bound} still pending. Choose a pod for its devices and Filter reasons.</p>` +
      podsTable(doc) + "<div id=\"pod\"></div><h2>Locks of shareable devices</h2>" + locksTable(doc) + lists(doc);
    for (const tr of root.querySelectorAll("tr.pod")) {
      tr.addEventListener("click", () => showPod(doc, root, tr.dataset.pod, gridFor));
    }
    const first = doc.pods.find((p) => !p.node) ?? doc.pods[0];
    if (first) showPod(doc, root, first.pod, gridFor);
    root.dataset.rendered = String(doc.pods.length);
  }

  return { render, showPod };
})();
