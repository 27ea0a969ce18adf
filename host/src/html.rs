//! `replay --output html`: the explainer's view of a recorded cluster as one self-contained file
//! to attach to a bug report. The explanation is computed here, natively, by the code the page
//! runs in WebAssembly (`sharing_affinity_replay::explain`), and inlined as JSON with the page's
//! own renderer (web/view.js) and styles (web/view.css): the same view, without the wasm.

use sharing_affinity_replay::explain::Explanation;

/// The page's renderer and styles, compiled in.
const VIEW_JS: &str = include_str!("../../web/view.js");
const VIEW_CSS: &str = include_str!("../../web/view.css");

/// The grid cells the report holds (nodes × device names, summed over pods): the pods left
/// unbound first, then the bound ones, until the cells reach it.
pub const GRID_CELLS: usize = 200_000;

/// The HTML document for `explanation` of the cluster read from `source` (a file name, shown in
/// the heading).
pub fn page(explanation: &Explanation, source: &str) -> String {
    let json = serde_json::to_string(explanation).expect("plain data serializes");
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>Why is my pod pending? — {title}</title>\n<style>\n{VIEW_CSS}</style>\n</head>\n<body>\n\
         <h1>Why is my pod pending?</h1>\n<p>{title}: replayed by sharing-affinity {version} \
         (<code>sharing-affinity replay --output html</code>).</p>\n<div id=\"out\"></div>\n\
         <script type=\"application/json\" id=\"explanation\">{data}</script>\n<script>\n{VIEW_JS}\
         SaView.render(JSON.parse(document.getElementById(\"explanation\").textContent), \
         document.getElementById(\"out\"));\n</script>\n</body>\n</html>\n",
        title = escape_html(source),
        version = env!("CARGO_PKG_VERSION"),
        data = script_safe(&json),
    )
}

/// JSON text that cannot end its `<script>` element: every `<` is written `\u003c`, which is the
/// same JSON (a `<` only occurs inside strings).
fn script_safe(json: &str) -> String {
    json.replace('<', "\\u003c")
}

fn escape_html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn the_data_cannot_close_its_script_element_and_the_view_is_inlined() {
        let explanation = Explanation {
            pods: Vec::new(),
            nodes: vec!["</script><script>alert(1)</script>".into()],
            locks: Vec::new(),
            rejected: Vec::new(),
            warnings: Vec::new(),
            grids: BTreeMap::new(),
        };
        let html = page(&explanation, "a<b>.json");
        assert_eq!(
            html.matches("</script>").count(),
            2,
            "only the two elements' own ends"
        );
        assert!(
            html.contains(r#"["\u003c/script>\u003cscript>alert(1)\u003c/script>"]"#),
            "{html}"
        );
        assert!(html.contains("a&lt;b&gt;.json"));
        assert!(
            html.contains("var SaView") && html.contains(".o-lock"),
            "view.js and view.css inlined"
        );
    }
}
