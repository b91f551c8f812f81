//! The report's pages: `index.html` (self-contained, the plots as `<img>` files beside it)
//! and `README.md` (the same tables and plots for a repository browser), and the summary
//! table printed on the terminal.

use std::fmt::Write as _;

use super::figures::{Headline, Unit};
use super::scorecard::{agrees, primary_configs, scorecard, ScoreRow, AGREEMENT};
use super::Section;

/// What the report says about the run that made it.
#[derive(Debug, Clone)]
pub struct Meta {
    /// `full`, `quick`, `smoke`.
    pub scale: &'static str,
    /// nmcp's version.
    pub version: &'static str,
    /// Wall time of every stage.
    pub seconds: f64,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The dissertation's value, ours and the ratio as printed.
fn cells(h: &Headline) -> [String; 3] {
    [
        h.dissertation
            .map(|d| h.unit.show(d))
            .unwrap_or_else(|| "—".into()),
        h.unit.show(h.ours),
        h.ratio()
            .map(|r| format!("{r:.2}"))
            .unwrap_or_else(|| "—".into()),
    ]
}

const INTRO: &str = "Each headline figure of the dissertation next to ours, the ratio \
(ours / dissertation), the configuration that produced ours and the baseline or bound it \
should be read against. The scorecard takes one row per headline from the chapters below, \
on the configuration that models the dissertation's hardware; no model constant is fitted \
to these numbers (docs/calibration.md).";

/// The scorecard's heading and anchor.
const SCORECARD: (&str, &str) = ("Scorecard: the dissertation's headlines", "scorecard");

/// A section's anchor: its title in lower case, letters and digits, runs of anything
/// else as one `-`.
pub fn anchor(title: &str) -> String {
    let mut s = String::new();
    for c in title.chars() {
        if c.is_ascii_alphanumeric() {
            s.push(c.to_ascii_lowercase());
        } else if !s.ends_with('-') && !s.is_empty() {
            s.push('-');
        }
    }
    s.trim_end_matches('-').to_string()
}

/// What the scorecard says where ours agrees, differs without a dissertation figure, or
/// differs.
fn cause_cell(r: &ScoreRow) -> String {
    match (&r.cause, agrees(&r.headline)) {
        (Some(c), _) => c.clone(),
        (None, Some(true)) if r.headline.unit == Unit::Times => format!(
            "agrees: within {:.0} % of the dissertation's gain",
            AGREEMENT * 100.0
        ),
        (None, Some(true)) => format!("agrees within {:.0} %", AGREEMENT * 100.0),
        _ => String::new(),
    }
}

/// The scorecard and the table of contents as HTML.
fn html_top(sections: &[Section]) -> String {
    let rows = scorecard(sections);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<h2 id=\"{}\">{}</h2>\n<table id=\"scorecard-table\">\n<tr><th>chapter</th>\
         <th>figure</th><th>dissertation</th><th>ours</th><th>ratio</th>\
         <th>where they differ, why</th></tr>",
        SCORECARD.1,
        esc(SCORECARD.0)
    );
    for r in &rows {
        let [d, o, q] = cells(&r.headline);
        let _ = writeln!(
            s,
            "<tr title=\"{}\"><td>{}</td><td>{}</td><td class=\"n\">{d}</td>\
             <td class=\"n\">{o}</td><td class=\"n\">{q}</td><td>{}</td></tr>",
            esc(&r.headline.config),
            esc(r.headline.chapter),
            esc(&r.headline.figure),
            esc(&cause_cell(r))
        );
    }
    s.push_str("</table>\n<p>Primary configurations: ");
    let configs: Vec<String> = primary_configs(&rows)
        .iter()
        .map(|(c, cfg)| format!("{}: <i>{}</i>", esc(c), esc(cfg)))
        .collect();
    s.push_str(&configs.join("; "));
    s.push_str(".</p>\n<nav><b>Contents:</b> ");
    let toc: Vec<String> = std::iter::once((SCORECARD.1.to_string(), "Scorecard"))
        .chain(sections.iter().map(|x| (anchor(x.title), x.title)))
        .map(|(a, t)| format!("<a href=\"#{a}\">{}</a>", esc(t)))
        .collect();
    s.push_str(&toc.join(" · "));
    s.push_str("</nav>\n");
    s
}

/// The scorecard and the table of contents as Markdown.
fn markdown_top(sections: &[Section]) -> String {
    let rows = scorecard(sections);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<a id=\"{}\"></a>\n\n## {}\n\n| chapter | figure | dissertation | ours | ratio | \
         where they differ, why |\n|---|---|---|---|---|---|",
        SCORECARD.1, SCORECARD.0
    );
    for r in &rows {
        let [d, o, q] = cells(&r.headline);
        let _ = writeln!(
            s,
            "| {} | {} | {d} | {o} | {q} | {} |",
            r.headline.chapter,
            md_cell(&r.headline.figure),
            md_cell(&cause_cell(r))
        );
    }
    let configs: Vec<String> = primary_configs(&rows)
        .iter()
        .map(|(c, cfg)| format!("{c}: *{}*", md_cell(cfg)))
        .collect();
    let _ = writeln!(s, "\nPrimary configurations: {}.\n", configs.join("; "));
    let toc: Vec<String> = std::iter::once((SCORECARD.1.to_string(), "Scorecard"))
        .chain(sections.iter().map(|x| (anchor(x.title), x.title)))
        .map(|(a, t)| format!("[{t}](#{a})"))
        .collect();
    let _ = writeln!(s, "Contents: {}\n", toc.join(" · "));
    s
}

/// `index.html`. A script marks the page once every plot has loaded (for the browser
/// test: `data-images-loaded` / `data-images-total` on `<body>`).
pub fn html(sections: &[Section], meta: &Meta) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>nmcp reproduce: the dissertation's figures</title>\n<style>\n\
         body{{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}}\n\
         table{{border-collapse:collapse;margin:1em 0;font-size:14px}}\n\
         th,td{{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}}\n\
         td.n{{text-align:right;white-space:nowrap}} th{{background:#f3f3f3}}\n\
         figure{{margin:1.5em 0}} img{{max-width:100%;border:1px solid #eee}}\n\
         code{{background:#f6f6f6;padding:1px 4px}}\n</style>\n</head>\n<body>\n\
         <h1>nmcp reproduce</h1>\n<p>{}</p>\n<p>Scale <b>{}</b>, nmcp {}, {:.0} s.</p>\n",
        esc(INTRO),
        meta.scale,
        meta.version,
        meta.seconds
    );
    s.push_str(&html_top(sections));
    for sec in sections {
        let _ = writeln!(
            s,
            "<h2 id=\"{}\">{}</h2>",
            anchor(sec.title),
            esc(sec.title)
        );
        for c in &sec.commands {
            let _ = writeln!(s, "<p><code>{}</code></p>", esc(c));
        }
        s.push_str(
            "<table>\n<tr><th>figure</th><th>dissertation</th><th>ours</th><th>ratio</th>\
             <th>configuration</th><th>baseline / bound</th></tr>\n",
        );
        for h in &sec.headlines {
            let [d, o, r] = cells(h);
            let _ = writeln!(
                s,
                "<tr><td>{}</td><td class=\"n\">{d}</td><td class=\"n\">{o}</td>\
                 <td class=\"n\">{r}</td><td>{}</td><td>{}</td></tr>",
                esc(&h.figure),
                esc(&h.config),
                esc(&h.baseline)
            );
        }
        s.push_str("</table>\n");
        for f in &sec.figures {
            let _ = writeln!(
                s,
                "<figure><img src=\"{}\" alt=\"{}\"><figcaption>{}</figcaption></figure>",
                esc(&f.file),
                esc(&f.caption),
                esc(&f.caption)
            );
        }
    }
    s.push_str(
        "<script>\n(function(){\n  function mark(){\n    var imgs=document.images, ok=0;\n    \
         for(var i=0;i<imgs.length;i++){ if(imgs[i].complete && imgs[i].naturalWidth>0) ok++; }\n    \
         document.body.setAttribute('data-images-total', imgs.length);\n    \
         document.body.setAttribute('data-images-loaded', ok);\n    \
         var t=document.getElementById('scorecard-table'), first=document.querySelector('table');\n    \
         if(t){ document.body.setAttribute('data-scorecard-rows', t.rows.length-1);\n      \
         document.body.setAttribute('data-scorecard-first', t===first ? 'yes' : 'no');\n      \
         document.body.setAttribute('data-scorecard-top', Math.round(t.getBoundingClientRect().top + window.scrollY)); }\n  }\n  \
         window.addEventListener('load', mark);\n})();\n</script>\n</body>\n</html>\n",
    );
    s
}

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// `README.md`.
pub fn markdown(sections: &[Section], meta: &Meta) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# nmcp reproduce\n\n{INTRO}\n\nScale **{}**, nmcp {}, {:.0} s. Open `index.html` \
         for the same page in a browser; each run's JSON is in `data/`.\n",
        meta.scale, meta.version, meta.seconds
    );
    s.push_str(&markdown_top(sections));
    for sec in sections {
        let _ = writeln!(
            s,
            "<a id=\"{}\"></a>\n\n## {}\n",
            anchor(sec.title),
            sec.title
        );
        for c in &sec.commands {
            let _ = writeln!(s, "    {c}");
        }
        s.push_str(
            "\n| figure | dissertation | ours | ratio | configuration | baseline / bound |\n\
             |---|---|---|---|---|---|\n",
        );
        for h in &sec.headlines {
            let [d, o, r] = cells(h);
            let _ = writeln!(
                s,
                "| {} | {d} | {o} | {r} | {} | {} |",
                md_cell(&h.figure),
                md_cell(&h.config),
                md_cell(&h.baseline)
            );
        }
        s.push('\n');
        for f in &sec.figures {
            let _ = writeln!(s, "![{}]({})\n", md_cell(&f.caption), f.file);
        }
    }
    s
}

/// The terminal's summary table: every headline figure, one line each.
pub fn summary(sections: &[Section]) -> String {
    let rows: Vec<[String; 5]> = sections
        .iter()
        .flat_map(|sec| {
            sec.headlines.iter().map(|h| {
                let [d, o, r] = cells(h);
                [h.chapter.to_string(), h.figure.clone(), d, o, r]
            })
        })
        .collect();
    let head = [
        "chapter".to_string(),
        "figure".into(),
        "dissertation".into(),
        "ours".into(),
        "ratio".into(),
    ];
    let mut w = [0usize; 5];
    for r in std::iter::once(&head).chain(&rows) {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let mut s = String::new();
    for r in std::iter::once(&head).chain(&rows) {
        let _ = writeln!(
            s,
            "{:<w0$}  {:<w1$}  {:>w2$}  {:>w3$}  {:>w4$}",
            r[0],
            r[1],
            r[2],
            r[3],
            r[4],
            w0 = w[0],
            w1 = w[1],
            w2 = w[2],
            w3 = w[3],
            w4 = w[4]
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::Figure;
    use super::*;

    fn section() -> Section {
        Section {
            title: "ch. 8 T3",
            commands: vec!["nmcp t3 --json".into()],
            headlines: vec![Headline {
                chapter: "ch. 8 T3",
                figure: "T3 over <Sequential>".into(),
                dissertation: Some(1.2),
                ours: 1.5,
                unit: Unit::Times,
                config: "a | b".into(),
                baseline: "bound".into(),
            }],
            figures: vec![Figure {
                file: "t3/t3-speedup.svg".into(),
                caption: "speedup".into(),
            }],
        }
    }

    #[test]
    fn pages_carry_every_figure_and_escape_text() {
        let meta = Meta {
            scale: "smoke",
            version: "0",
            seconds: 1.0,
        };
        let h = html(&[section()], &meta);
        assert!(h.contains("<img src=\"t3/t3-speedup.svg\""));
        assert!(h.contains("T3 over &lt;Sequential&gt;"));
        assert!(h.contains("<td class=\"n\">1.25</td>"), "ratio 1.5 / 1.2");
        let m = markdown(&[section()], &meta);
        assert!(m.contains("![speedup](t3/t3-speedup.svg)"));
        assert!(m.contains("| a \\| b |"));
        // The scorecard opens both pages (here with no primary rows) and the contents
        // link every section's anchor.
        assert!(h.find("scorecard-table") < h.find("<h2 id=\"ch-8-t3\">"));
        assert!(h.contains("<a href=\"#ch-8-t3\">ch. 8 T3</a>"));
        assert!(m.contains("[ch. 8 T3](#ch-8-t3)") && m.contains("<a id=\"ch-8-t3\"></a>"));
        assert_eq!(
            anchor("Extensions: ALU models, MASA (SARP)"),
            "extensions-alu-models-masa-sarp"
        );
        let t = summary(&[section()]);
        assert!(t.lines().count() == 2 && t.contains("1.50x") && t.contains("1.20x"));
    }
}
