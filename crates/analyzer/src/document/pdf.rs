//! `pantheon_report.pdf` with printpdf: A4 pages, text in the embedded DejaVu Sans (so `→`,
//! `σ`, `µ` print), plots as PNG images scaled to the page width. The layout follows
//! Pantheon's LaTeX report: a title page, the summary plots, the table, then per run its
//! statistics and its two plots.

use std::io::Cursor;

use printpdf::image_crate::codecs::png::PngDecoder;
use printpdf::{
    Image, ImageTransform, IndirectFontRef, Mm, PdfDocument, PdfDocumentReference,
    PdfLayerReference,
};

use super::Report;
use crate::compare::{MeanInterval, INTERVAL_NOTE};

const PAGE_W: f32 = 210.0;
const PAGE_H: f32 = 297.0;
const MARGIN: f32 = 15.0;

/// Lays text and images top-down on A4 pages, adding a page when one is full.
struct Writer {
    doc: PdfDocumentReference,
    layer: PdfLayerReference,
    font: IndirectFontRef,
    /// Distance of the next line's baseline from the page's bottom, mm.
    y: f32,
}

impl Writer {
    fn new(title: &str) -> Result<Writer, String> {
        let (doc, page, layer) = PdfDocument::new(title, Mm(PAGE_W), Mm(PAGE_H), "report");
        let font = doc
            .add_external_font(Cursor::new(crate::report::FONT_BYTES))
            .map_err(|e| e.to_string())?;
        let layer = doc.get_page(page).get_layer(layer);
        Ok(Writer {
            doc,
            layer,
            font,
            y: PAGE_H - MARGIN,
        })
    }

    fn new_page(&mut self) {
        let (page, layer) = self.doc.add_page(Mm(PAGE_W), Mm(PAGE_H), "report");
        self.layer = self.doc.get_page(page).get_layer(layer);
        self.y = PAGE_H - MARGIN;
    }

    /// One line of text at `size` pt, wrapped at the right margin (by an average glyph width).
    fn text(&mut self, line: &str, size: f32) {
        let height = size * 0.3528 * 1.35; // pt → mm, with leading
        let per_line = ((PAGE_W - 2.0 * MARGIN) / (size * 0.3528 * 0.55)) as usize;
        let chars: Vec<char> = line.chars().collect();
        let chunks: Vec<String> = if chars.is_empty() {
            vec![String::new()]
        } else {
            chars
                .chunks(per_line.max(10))
                .map(|c| c.iter().collect())
                .collect()
        };
        for chunk in chunks {
            if self.y - height < MARGIN {
                self.new_page();
            }
            self.y -= height;
            self.layer
                .use_text(chunk, size, Mm(MARGIN), Mm(self.y), &self.font);
        }
    }

    /// Text at fixed column positions (mm from the left margin) on one line.
    fn row(&mut self, cells: &[(f32, String)], size: f32) {
        let height = size * 0.3528 * 1.5;
        if self.y - height < MARGIN {
            self.new_page();
        }
        self.y -= height;
        for (x, text) in cells {
            self.layer
                .use_text(text.as_str(), size, Mm(MARGIN + x), Mm(self.y), &self.font);
        }
    }

    /// A PNG scaled to the text width; on a new page if it does not fit.
    fn png(&mut self, bytes: &[u8]) -> Result<(), String> {
        let decoder = PngDecoder::new(Cursor::new(bytes)).map_err(|e| e.to_string())?;
        let image = Image::try_from(decoder).map_err(|e| e.to_string())?;
        let (w_px, h_px) = (image.image.width.0 as f32, image.image.height.0 as f32);
        let width_mm = PAGE_W - 2.0 * MARGIN;
        let height_mm = width_mm * h_px / w_px;
        if self.y - height_mm < MARGIN {
            self.new_page();
        }
        self.y -= height_mm + 4.0;
        image.add_to_layer(
            self.layer.clone(),
            ImageTransform {
                translate_x: Some(Mm(MARGIN)),
                translate_y: Some(Mm(self.y)),
                dpi: Some(w_px / (width_mm / 25.4)),
                ..ImageTransform::default()
            },
        );
        Ok(())
    }
}

/// The report as PDF bytes.
pub fn pdf(r: &Report) -> Result<Vec<u8>, String> {
    let mut w = Writer::new("Pantheon Report")?;
    w.text("Pantheon Report", 20.0);
    w.text("", 10.0);
    w.text(&format!("Generated at {} (UTC).", r.generated_at), 10.0);
    w.text(&r.path, 10.0);
    for sentence in r.sentences() {
        w.text(&sentence, 10.0);
    }
    w.text("", 10.0);
    w.text("System info:", 10.0);
    for l in &r.system_info {
        w.text(&format!("    {l}"), 9.0);
    }
    w.text("", 10.0);
    w.text("Versions:", 10.0);
    for (what, v) in &r.versions {
        w.text(&format!("    {what}: {v}"), 9.0);
    }

    w.new_page();
    if r.summary_pngs.is_empty() {
        w.text("Figure is missing.", 10.0);
    }
    for png in &r.summary_pngs {
        w.png(png)?;
    }

    w.new_page();
    w.text("Means over valid runs", 14.0);
    let k = r.table_flows();
    let cell = |v: Option<MeanInterval>| v.map_or("N/A".to_owned(), |v| v.display(2));
    w.row(
        &[
            (0.0, "scheme".into()),
            (45.0, "# runs".into()),
            (62.0, "flow".into()),
            (78.0, "mean avg tput (Mbit/s)".into()),
            (118.0, "mean p95 delay (ms)".into()),
            (155.0, "mean loss (%)".into()),
        ],
        8.5,
    );
    for row in &r.table {
        for i in 0..k {
            let f = row.flows.get(i).copied().unwrap_or_default();
            let first = |s: String| if i == 0 { s } else { String::new() };
            w.row(
                &[
                    (0.0, first(row.label.clone())),
                    (45.0, first(format!("{}/{}", row.runs.0, row.runs.1))),
                    (62.0, (i + 1).to_string()),
                    (78.0, cell(f.tput_mbps)),
                    (118.0, cell(f.delay_ms)),
                    (155.0, cell(f.loss_pct)),
                ],
                8.5,
            );
        }
    }
    w.text(INTERVAL_NOTE, 8.0);

    for t in &r.sections {
        table_page(
            &mut w,
            &t.title,
            &t.header,
            &t.rows,
            std::slice::from_ref(&t.note),
            &t.plots_png,
        )?;
    }

    for run in &r.runs {
        w.new_page();
        w.text(
            &format!("Run {}: Statistics of {}", run.run_id, run.label),
            14.0,
        );
        for l in run.stats.lines() {
            w.text(l, 8.5);
        }
        w.new_page();
        w.text(
            &format!("Run {}: Report of {} — Data Link", run.run_id, run.label),
            14.0,
        );
        for png in [&run.throughput_png, &run.delay_png] {
            match png {
                Some(bytes) => w.png(bytes)?,
                None => w.text("Figure is missing.", 10.0),
            }
        }
        if let Some(c) = &run.competition {
            competition_page(&mut w, run, c)?;
        }
        files_to_look_inside(&mut w, run);
    }
    w.doc.save_to_bytes().map_err(|e| e.to_string())
}

/// A run's files to look inside, named (the HTML report links them).
fn files_to_look_inside(w: &mut Writer, run: &crate::document::RunSection) {
    if run.files.is_empty() {
        return;
    }
    let title = format!(
        "Run {}: files to look inside, beside this report",
        run.run_id
    );
    w.text(&title, 10.0);
    for f in &run.files {
        w.text(f, 8.5);
    }
}

/// A mixed run's competition: its table, the lines on the run and its plot, on a new page.
fn competition_page(
    w: &mut Writer,
    run: &crate::document::RunSection,
    c: &crate::document::CompetitionSection,
) -> Result<(), String> {
    let title = format!("Run {}: Competition — {}", run.run_id, run.label);
    let plots: Vec<Vec<u8>> = c.plot_png.iter().cloned().collect();
    table_page(w, &title, &c.header, &c.rows, &c.notes, &plots)?;
    if c.plot_png.is_none() {
        w.text("Figure is missing.", 10.0);
    }
    Ok(())
}

/// A new page: `title`, a table of `header` and `rows` (columns spread over the text width),
/// the `notes` under it and `plots`.
fn table_page(
    w: &mut Writer,
    title: &str,
    header: &[String],
    rows: &[Vec<String>],
    notes: &[String],
    plots: &[Vec<u8>],
) -> Result<(), String> {
    w.new_page();
    w.text(title, 14.0);
    let step = (PAGE_W - 2.0 * MARGIN) / header.len().max(1) as f32;
    let row = |cells: &[String]| -> Vec<(f32, String)> {
        cells
            .iter()
            .enumerate()
            .map(|(i, t)| (i as f32 * step, t.clone()))
            .collect()
    };
    w.row(&row(header), 8.0);
    for r in rows {
        w.row(&row(r), 8.0);
    }
    for n in notes {
        w.text(n, 9.0);
    }
    for p in plots {
        w.png(p)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pdf_has_a_page_per_section_and_embeds_the_plots() {
        // A real PNG (a plot of the sample's size would do; a tiny one keeps the test fast).
        let dir = std::env::temp_dir().join(format!("pdf-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let png_path = dir.join("p.png");
        {
            use plotters::prelude::*;
            let root = BitMapBackend::new(&png_path, (60, 30)).into_drawing_area();
            root.fill(&RED).unwrap();
            root.present().unwrap();
        }
        let png = std::fs::read(&png_path).unwrap();
        let mut r = super::super::html::tests::sample();
        r.summary_pngs = vec![png.clone()];
        r.runs[0].throughput_png = Some(png);
        let bytes = pdf(&r).unwrap();
        assert!(bytes.starts_with(b"%PDF-"));
        // Pages: title, summary, table, the run's statistics, the run's plots.
        let count = |pat: &[u8]| bytes.windows(pat.len()).filter(|w| *w == pat).count();
        assert_eq!(count(b"/Type/Page/") + count(b"/Type/Page>>"), 5);
        // Two images embedded (the summary plot and the throughput plot), compressed.
        assert_eq!(count(b"/Subtype/Image"), 2);
        assert!(count(b"/FlateDecode") >= 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
