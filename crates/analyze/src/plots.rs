//! The four plots, drawn once per backend: inline SVG for the HTML report, PNG copies.

use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::AnalyzeError;
use crate::model::Analysis;

/// Plot size in pixels.
pub(crate) const SIZE: (u32, u32) = (900, 420);

const FONT_PATHS: [&str; 4] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
];

/// Registers DejaVu Sans as plotters' `sans-serif` once per process.
fn ensure_font() -> Result<(), String> {
    static FONT: OnceLock<Result<(), String>> = OnceLock::new();
    FONT.get_or_init(|| {
        let bytes = FONT_PATHS.iter().find_map(|p| std::fs::read(p).ok()).ok_or_else(|| {
            format!(
                "no DejaVu Sans font found (looked in {}); install it (Debian: apt-get install fonts-dejavu-core)",
                FONT_PATHS.join(", ")
            )
        })?;
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
            .map_err(|_| "the DejaVu Sans font file is not a valid font".to_string())
    })
    .clone()
}

/// Which plot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plot {
    Timeline,
    Bandwidth,
    TransferSizes,
    FileAccess,
}

impl Plot {
    pub(crate) const ALL: [Plot; 4] = [
        Plot::Timeline,
        Plot::Bandwidth,
        Plot::TransferSizes,
        Plot::FileAccess,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Plot::Timeline => "timeline",
            Plot::Bandwidth => "bandwidth",
            Plot::TransferSizes => "transfer-sizes",
            Plot::FileAccess => "file-access",
        }
    }

    pub(crate) fn title(self) -> &'static str {
        match self {
            Plot::Timeline => "Per-rank timeline: compute (blue, top) and I/O (orange, bottom)",
            Plot::Bandwidth => "Bandwidth over time",
            Plot::TransferSizes => "Transfer sizes (Darshan buckets)",
            Plot::FileAccess => "File access distribution",
        }
    }

    fn draw<DB: DrawingBackend>(
        self,
        root: &DrawingArea<DB, Shift>,
        a: &Analysis,
    ) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        match self {
            Plot::Timeline => timeline(root, a),
            Plot::Bandwidth => bandwidth(root, a),
            Plot::TransferSizes => transfer_sizes(root, a),
            Plot::FileAccess => file_access(root, a),
        }
        .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())
    }

    fn error(self, reason: String) -> AnalyzeError {
        AnalyzeError::Plot {
            plot: self.name(),
            reason,
        }
    }

    /// The plot as an SVG document.
    pub(crate) fn svg(self, a: &Analysis) -> Result<String, AnalyzeError> {
        ensure_font().map_err(|r| self.error(r))?;
        let mut out = String::new();
        {
            let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
            self.draw(&root, a).map_err(|r| self.error(r))?;
        }
        Ok(out)
    }

    /// The plot as PNG bytes.
    pub(crate) fn png(self, a: &Analysis) -> Result<Vec<u8>, AnalyzeError> {
        render_png(|root| self.draw(root, a)).map_err(|r| self.error(r))
    }
}

/// Draws with `draw` on a white bitmap of [`SIZE`] and encodes it as PNG.
fn render_png(
    draw: impl FnOnce(&DrawingArea<BitMapBackend<'_>, Shift>) -> Result<(), String>,
) -> Result<Vec<u8>, String> {
    ensure_font()?;
    let mut rgb = vec![0u8; (SIZE.0 * SIZE.1 * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, SIZE).into_drawing_area();
        draw(&root)?;
    }
    let img = image::RgbImage::from_raw(SIZE.0, SIZE.1, rgb)
        .ok_or_else(|| "the bitmap has the wrong size".to_string())?;
    let mut png = Vec::new();
    img.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .map_err(|e| e.to_string())?;
    Ok(png)
}

/// One point of a `dlio capacity` search, for [`capacity_png`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CapacityPoint {
    /// Simulated accelerators.
    pub accelerators: u32,
    /// The lowest AU of the point's runs, percent.
    pub lowest_au_percentage: f64,
    /// Whether every run of the point met the threshold.
    pub passed: bool,
}

/// `capacity.png`: the lowest AU of each point against the accelerator count, passing points
/// in blue and failing ones in orange, with the threshold as a dashed line.
pub fn capacity_png(
    points: &[CapacityPoint],
    threshold_percentage: f64,
) -> Result<Vec<u8>, AnalyzeError> {
    let mut sorted = points.to_vec();
    sorted.sort_by_key(|p| p.accelerators);
    render_png(|root| {
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        capacity_chart(root, &sorted, threshold_percentage).map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())
    })
    .map_err(|reason| AnalyzeError::Plot {
        plot: "capacity",
        reason,
    })
}

fn capacity_chart<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    points: &[CapacityPoint],
    threshold: f64,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let right = points.iter().map(|p| p.accelerators).max().unwrap_or(1) as f64 * 1.05 + 1.0;
    let mut chart = ChartBuilder::on(root)
        .caption(
            "Accelerator utilization vs simulated accelerators",
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(0.0..right, 0.0..105.0)?;
    chart
        .configure_mesh()
        .x_desc("simulated accelerators")
        .y_desc("lowest AU of the runs (%)")
        .draw()?;
    chart.draw_series(DashedLineSeries::new(
        [(0.0, threshold), (right, threshold)],
        6,
        4,
        RED.stroke_width(1),
    ))?;
    chart.draw_series(LineSeries::new(
        points
            .iter()
            .map(|p| (f64::from(p.accelerators), p.lowest_au_percentage.min(105.0))),
        BLACK.mix(0.4).stroke_width(1),
    ))?;
    chart.draw_series(points.iter().map(|p| {
        let color = if p.passed { COMPUTE_COLOR } else { IO_COLOR };
        Circle::new(
            (f64::from(p.accelerators), p.lowest_au_percentage.min(105.0)),
            5,
            color.filled(),
        )
    }))?;
    Ok(())
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

const COMPUTE_COLOR: RGBColor = RGBColor(31, 119, 180);
const IO_COLOR: RGBColor = RGBColor(255, 127, 14);

fn timeline<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, a: &Analysis) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let bin = a.bandwidth.bin_s;
    let n = a.timeline.len().max(1) as f64;
    let end = bin * a.bandwidth.read_mib_s.len() as f64;
    let mut chart = ChartBuilder::on(root)
        .caption(Plot::Timeline.title(), ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(0.0..end.max(1e-9), 0.0..n)?;
    chart
        .configure_mesh()
        .x_desc("time since job start (s)")
        .y_desc("rank")
        .y_labels(a.timeline.len().clamp(1, 16))
        .y_label_formatter(&|y| {
            let i = y.floor() as usize;
            a.timeline
                .get(i)
                .map_or(String::new(), |r| r.rank.to_string())
        })
        .disable_y_mesh()
        .draw()?;
    for (row, r) in a.timeline.iter().enumerate() {
        let y = row as f64;
        let bars = r
            .compute
            .iter()
            .enumerate()
            .filter(|(_, f)| **f > 0.0)
            .map(|(i, f)| {
                let x = i as f64 * bin;
                Rectangle::new(
                    [(x, y + 0.5), (x + bin, y + 0.95)],
                    COMPUTE_COLOR.mix(f64::from(*f).max(0.08)).filled(),
                )
            })
            .chain(
                r.io.iter()
                    .enumerate()
                    .filter(|(_, f)| **f > 0.0)
                    .map(|(i, f)| {
                        let x = i as f64 * bin;
                        Rectangle::new(
                            [(x, y + 0.05), (x + bin, y + 0.5)],
                            IO_COLOR.mix(f64::from(*f).max(0.08)).filled(),
                        )
                    }),
            );
        chart.draw_series(bars)?;
    }
    Ok(())
}

fn bandwidth<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, a: &Analysis) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let b = &a.bandwidth;
    let end = b.bin_s * b.read_mib_s.len() as f64;
    let top = b
        .read_mib_s
        .iter()
        .chain(&b.write_mib_s)
        .cloned()
        .fold(0.0, f64::max);
    let mut chart = ChartBuilder::on(root)
        .caption(Plot::Bandwidth.title(), ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(65)
        .build_cartesian_2d(0.0..end.max(1e-9), 0.0..(top * 1.1).max(1e-6))?;
    chart
        .configure_mesh()
        .x_desc("time since job start (s)")
        .y_desc("MiB/s")
        .draw()?;
    let mid = |i: usize| (i as f64 + 0.5) * b.bin_s;
    chart
        .draw_series(LineSeries::new(
            b.read_mib_s.iter().enumerate().map(|(i, v)| (mid(i), *v)),
            COMPUTE_COLOR.stroke_width(2),
        ))?
        .label("read")
        .legend(|(x, y)| {
            PathElement::new(vec![(x, y), (x + 18, y)], COMPUTE_COLOR.stroke_width(2))
        });
    chart
        .draw_series(LineSeries::new(
            b.write_mib_s.iter().enumerate().map(|(i, v)| (mid(i), *v)),
            IO_COLOR.stroke_width(2),
        ))?
        .label("write")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], IO_COLOR.stroke_width(2)));
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

fn transfer_sizes<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, a: &Analysis) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let r = &a.transfer_sizes.read.buckets;
    let w = &a.transfer_sizes.write.buckets;
    let top = r.iter().chain(w).map(|b| b.count).max().unwrap_or(0).max(1) as f64;
    let labels: Vec<&str> = r.iter().map(|b| b.label).collect();
    let mut chart = ChartBuilder::on(root)
        .caption(Plot::TransferSizes.title(), ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(65)
        .build_cartesian_2d(0.0..labels.len() as f64, 0.0..top * 1.1)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(labels.len() * 2 + 1)
        .x_label_formatter(&|x| {
            let f = x.fract();
            if (f - 0.5).abs() < 0.01 {
                labels
                    .get(x.floor() as usize)
                    .map_or(String::new(), |l| l.to_string())
            } else {
                String::new()
            }
        })
        .x_desc("transfer size (bytes)")
        .y_desc("calls")
        .draw()?;
    chart
        .draw_series(r.iter().enumerate().map(|(i, b)| {
            let x = i as f64;
            Rectangle::new(
                [(x + 0.1, 0.0), (x + 0.5, b.count as f64)],
                COMPUTE_COLOR.filled(),
            )
        }))?
        .label("reads")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], COMPUTE_COLOR.filled()));
    chart
        .draw_series(w.iter().enumerate().map(|(i, b)| {
            let x = i as f64;
            Rectangle::new(
                [(x + 0.5, 0.0), (x + 0.9, b.count as f64)],
                IO_COLOR.filled(),
            )
        }))?
        .label("writes")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], IO_COLOR.filled()));
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

fn file_access<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, a: &Analysis) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let d = &a.files.by_open_count;
    let shown: Vec<_> = d.iter().take(40).collect();
    let top = shown.iter().map(|o| o.files).max().unwrap_or(0).max(1) as f64;
    let mut chart = ChartBuilder::on(root)
        .caption(Plot::FileAccess.title(), ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(65)
        .build_cartesian_2d(0.0..shown.len().max(1) as f64, 0.0..top * 1.1)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(shown.len() * 2 + 1)
        .x_label_formatter(&|x| {
            if (x.fract() - 0.5).abs() < 0.01 {
                shown
                    .get(x.floor() as usize)
                    .map_or(String::new(), |o| o.opens.to_string())
            } else {
                String::new()
            }
        })
        .x_desc("opens per file")
        .y_desc("files")
        .draw()?;
    chart.draw_series(shown.iter().enumerate().map(|(i, o)| {
        let x = i as f64;
        Rectangle::new(
            [(x + 0.15, 0.0), (x + 0.85, o.files as f64)],
            COMPUTE_COLOR.filled(),
        )
    }))?;
    Ok(())
}

/// One line of [`lines_svg`]: a label and its points.
pub(crate) struct Series<'a> {
    pub label: &'a str,
    pub points: Vec<(f64, f64)>,
}

/// The line colours of [`lines_svg`], in series order.
const SERIES_COLORS: [RGBColor; 2] = [COMPUTE_COLOR, IO_COLOR];

/// An SVG chart of up to two labelled lines (characterisation and fidelity reports).
pub(crate) fn lines_svg(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series<'_>],
) -> Result<String, AnalyzeError> {
    let err = |reason: String| AnalyzeError::Plot {
        plot: "report",
        reason,
    };
    ensure_font().map_err(err)?;
    let all = || series.iter().flat_map(|s| s.points.iter());
    let x_max = all().map(|p| p.0).fold(0.0f64, f64::max).max(1e-9) * 1.02;
    let y_max = all().map(|p| p.1).fold(0.0f64, f64::max).max(1e-9) * 1.05;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        let draw = || -> DrawResult {
            root.fill(&WHITE)?;
            let mut chart = ChartBuilder::on(&root)
                .caption(title, ("sans-serif", 18))
                .margin(10)
                .x_label_area_size(35)
                .y_label_area_size(60)
                .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
            chart
                .configure_mesh()
                .x_desc(x_desc)
                .y_desc(y_desc)
                .draw()?;
            for (s, color) in series.iter().zip(SERIES_COLORS.iter().cycle()) {
                chart
                    .draw_series(LineSeries::new(
                        s.points.iter().copied(),
                        color.stroke_width(2),
                    ))?
                    .label(s.label)
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                    });
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()?;
            root.present()?;
            Ok(())
        };
        draw().map_err(|e| err(e.to_string()))?;
    }
    Ok(out)
}
