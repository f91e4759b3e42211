//! Screenshots of invoice PDFs, for a reviewer to look at: the first page of each sample
//! document (a sandbox charge invoice in English, a settled charge invoice in German, a credit
//! invoice in French, a legacy refund invoice in Spanish, one crowded with long texts and wide
//! amounts in German) rendered to PNG by PDFium, under
//! `<target>/tmp/invoice-screenshots/` (the paths are printed). Each image is checked to be the
//! page: A4 at the scale asked, a good share of dark pixels where the text is, and nothing dark
//! in the margins (no text cut at or running past the right edge).
//!
//! The renderer is the Python package `pypdfium2` (with Pillow writing the PNG) in a virtualenv
//! cached in the cargo target directory (`tmp/pdf-render-venv`), made with `python3 -m venv` and
//! filled by pip from `tests/python/requirements.txt`; it is reused while it holds exactly
//! those requirements. Under `CI=true` a missing `python3`, a virtualenv that cannot be made or
//! a package registry that cannot be reached fails this test; elsewhere the test says what is
//! missing and stops there.

mod samples;

use std::path::{Path, PathBuf};
use std::process::Command;

use rebill_pdf::{InvoiceDocument, Locale, render};

/// The pinned requirements; the virtualenv records the text it was built from.
const REQUIREMENTS: &str = include_str!("python/requirements.txt");

/// Pixels per PDF point (108 dpi).
const SCALE: f64 = 1.5;
/// The page in points (A4) and its margins, as `rebill-pdf` lays it out.
const PAGE: (f64, f64) = (595.0, 842.0);
const MARGIN: f64 = 50.0;
/// A pixel darker than this (0–255, the mean of its channels) is ink: text and rules. The
/// sandbox watermark (gray 0.86, about 219) is not.
const INK: u32 = 160;

fn tmp() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
}

fn python_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("python")
}

fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// Runs `command`, answering its standard output, or what went wrong.
fn run(command: &mut Command, what: &str) -> Result<String, String> {
    let output = command.output().map_err(|e| format!("{what}: cannot run {command:?}: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "{what}: {command:?} failed ({})\n--- stdout\n{}\n--- stderr\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn imports_renderer(python: &Path) -> bool {
    Command::new(python).args(["-c", "import pypdfium2, PIL"]).output().is_ok_and(|o| o.status.success())
}

/// The interpreter of a virtualenv holding exactly the pinned requirements, made (or made again)
/// when the cached one does not; what is missing when it cannot be made.
fn prepare_venv() -> Result<PathBuf, String> {
    let venv = tmp().join("pdf-render-venv");
    let python = venv.join("bin").join("python");
    let stamp = venv.join("rebill-requirements.txt");
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == REQUIREMENTS) && imports_renderer(&python) {
        return Ok(python);
    }
    // Built beside the cache and moved into place when complete, so that an interrupted build
    // is never taken for a cached one; partial builds of earlier runs go first.
    for entry in std::fs::read_dir(tmp()).into_iter().flatten().flatten() {
        if entry.file_name().to_string_lossy().starts_with("pdf-render-venv.building-") {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    let building = tmp().join(format!("pdf-render-venv.building-{}", std::process::id()));
    let needs = "the invoice screenshots need python3 with the venv module and pip \
                 (Debian: apt-get install python3 python3-venv)";
    run(Command::new("python3").arg("--version"), needs)?;
    run(Command::new("python3").args(["-m", "venv"]).arg(&building), needs)?;
    let building_python = building.join("bin").join("python");
    run(
        Command::new(&building_python)
            .args(["-m", "pip", "install", "--disable-pip-version-check", "--no-input", "-r"])
            .arg(python_dir().join("requirements.txt")),
        "installing pypdfium2 and Pillow from the package registry (PyPI must be reachable)",
    )?;
    if !imports_renderer(&building_python) {
        return Err("the new virtualenv does not import pypdfium2 and PIL".to_owned());
    }
    std::fs::write(building.join("rebill-requirements.txt"), REQUIREMENTS)
        .map_err(|e| format!("write the virtualenv's stamp: {e}"))?;
    let _ = std::fs::remove_dir_all(&venv);
    std::fs::rename(&building, &venv).map_err(|e| format!("move {} to {}: {e}", building.display(), venv.display()))?;
    Ok(python)
}

/// A decoded PNG as 8-bit RGB rows.
struct Image {
    width: usize,
    height: usize,
    rgb: Vec<u8>,
}

impl Image {
    fn read(path: &Path) -> Image {
        let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
        let mut reader = png::Decoder::new(std::io::BufReader::new(file))
            .read_info()
            .unwrap_or_else(|e| panic!("{} is not a PNG: {e}", path.display()));
        let size = reader.output_buffer_size().expect("a frame size that fits in memory");
        let mut buf = vec![0; size];
        let info = reader.next_frame(&mut buf).unwrap_or_else(|e| panic!("decode {}: {e}", path.display()));
        assert_eq!(
            (info.color_type, info.bit_depth),
            (png::ColorType::Rgb, png::BitDepth::Eight),
            "{}: 8-bit RGB",
            path.display()
        );
        buf.truncate(info.buffer_size());
        Image { width: info.width as usize, height: info.height as usize, rgb: buf }
    }

    /// Whether the pixel at (`x`, `y`) from the top left is ink.
    fn ink(&self, x: usize, y: usize) -> bool {
        let at = (y * self.width + x) * 3;
        let sum: u32 = self.rgb[at..at + 3].iter().map(|c| u32::from(*c)).sum();
        sum / 3 < INK
    }

    /// The share of ink in the rectangle of PDF points `x0..x1` by `top..bottom` (from the top).
    fn ink_share(&self, (x0, x1): (f64, f64), (top, bottom): (f64, f64)) -> f64 {
        let px = |points: f64, limit: usize| ((points * SCALE).round() as usize).min(limit);
        let (x0, x1) = (px(x0, self.width), px(x1, self.width));
        let (y0, y1) = (px(top, self.height), px(bottom, self.height));
        let area = (x1 - x0) * (y1 - y0);
        let inked = (y0..y1).flat_map(|y| (x0..x1).map(move |x| (x, y))).filter(|&(x, y)| self.ink(x, y)).count();
        inked as f64 / area.max(1) as f64
    }
}

#[test]
fn invoice_pages_render_to_images_of_the_page() {
    let python = match prepare_venv() {
        Ok(python) => python,
        Err(missing) if under_ci() => panic!("{missing}"),
        Err(missing) => {
            eprintln!("invoice screenshots not made (set CI=true to make this a failure): {missing}");
            return;
        }
    };
    let out = tmp().join("invoice-screenshots");
    std::fs::create_dir_all(&out).unwrap_or_else(|e| panic!("create {}: {e}", out.display()));
    let samples: [(&str, InvoiceDocument, Locale); 5] = [
        ("charge-en-US", samples::document(6, true), Locale::EnUs),
        ("settled-charge-de-DE", samples::settled_charge(), Locale::DeDe),
        ("credit-fr-FR", samples::credit(), Locale::FrFr),
        ("legacy-refund-es-ES", samples::legacy_refund(), Locale::EsEs),
        ("crowded-de-DE", samples::crowded(), Locale::DeDe),
    ];
    let mut args = vec![SCALE.to_string()];
    let mut pngs = Vec::new();
    for (name, doc, locale) in &samples {
        let pdf = out.join(format!("{name}.pdf"));
        std::fs::write(&pdf, render(doc, *locale)).unwrap_or_else(|e| panic!("write {}: {e}", pdf.display()));
        let png = out.join(format!("{name}.png"));
        let _ = std::fs::remove_file(&png);
        args.extend([pdf.display().to_string(), png.display().to_string()]);
        pngs.push(png);
    }
    let printed =
        run(Command::new(&python).arg(python_dir().join("render_pages.py")).args(&args), "rendering the pages")
            .unwrap_or_else(|e| panic!("{e}"));

    let (width, height) = ((PAGE.0 * SCALE).round() as usize, (PAGE.1 * SCALE).round() as usize);
    for png in &pngs {
        println!("invoice screenshot: {}", png.display());
        assert!(printed.contains(&png.display().to_string()), "the renderer wrote {}:\n{printed}", png.display());
        let image = Image::read(png);
        assert!(
            image.width.abs_diff(width) <= 1 && image.height.abs_diff(height) <= 1,
            "{}: {}x{} pixels, an A4 page at {SCALE} pixels a point is {width}x{height}",
            png.display(),
            image.width,
            image.height
        );
        // The header, bill-to and line items: text, not a blank page, not a black one.
        let text_area = image.ink_share((MARGIN, PAGE.0 - MARGIN), (40.0, 260.0));
        assert!((0.02..0.5).contains(&text_area), "{}: {:.1}% ink in the text area", png.display(), text_area * 100.0);
        // Nothing in the margins: no text cut at or running past the edges (the footer sits
        // in the bottom margin, at 36 points from the bottom).
        for (what, x, y) in [
            ("left margin", (0.0, MARGIN - 2.0), (0.0, PAGE.1)),
            ("right margin", (PAGE.0 - MARGIN + 2.0, PAGE.0), (0.0, PAGE.1)),
            ("top margin", (0.0, PAGE.0), (0.0, 30.0)),
            ("bottom edge", (0.0, PAGE.0), (PAGE.1 - 30.0, PAGE.1)),
        ] {
            let share = image.ink_share(x, y);
            assert!(share == 0.0, "{}: ink in the {what} ({:.3}%)", png.display(), share * 100.0);
        }
    }
}
