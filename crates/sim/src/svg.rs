//! The charts of a report, drawn by `ioshare-chart`: per-group IOPS and p99 latency over time, vrate
//! and utilisation over time, and latency distributions (latency against percentile). This module
//! only turns a report into the charts' series and axes.

use std::path::{Path, PathBuf};

use ioshare_chart::{Axis, Chart, LineChart, Series};

use crate::report::{GroupPoint, Report};

/// Size of each chart, pixels.
const SIZE: (f64, f64) = (720.0, 400.0);

/// Percentiles on a tail axis: x = −log10(1 − q), so p90, p99, p99.9 are evenly spaced.
fn tail(q: f64) -> f64 {
    -(1.0 - q).max(1e-5).log10()
}

/// The four charts of `report`, by file-name suffix.
fn charts(report: &Report) -> [(&'static str, LineChart); 4] {
    let per_group = |f: fn(&GroupPoint) -> f64| -> Vec<Series> {
        report.groups.iter().map(|g| Series::new(&g.path, g.series.iter().map(|p| (p.t_s, f(p))).collect())).collect()
    };
    let title = |what: &str| format!("{} ({}): {what}", report.scenario, report.controller);
    let time = || Axis::linear("time").unit("s").tight();
    let dist: Vec<Series> = report
        .groups
        .iter()
        .map(|g| {
            Series::new(&g.path, g.lat_dist.iter().filter(|[q, _]| *q >= 0.5).map(|[q, us]| (tail(*q), *us)).collect())
        })
        .collect();
    let percentiles = [(tail(0.5), "p50"), (1.0, "p90"), (2.0, "p99"), (3.0, "p99.9"), (4.0, "p99.99"), (5.0, "max")];
    let device =
        |f: fn(&crate::report::DevicePoint) -> f64| report.device.series.iter().map(|p| (p.t_s, f(p))).collect();
    let chart = |what: &str, x: Axis, y: Axis, series: Vec<Series>| LineChart { title: title(what), x, y, series };
    [
        ("iops", chart("IOPS", time(), Axis::linear("IOPS").from_zero(), per_group(|p| p.iops))),
        ("latency", chart("p99 latency", time(), Axis::log("p99 latency").unit("µs"), per_group(|p| p.lat_p99_us))),
        (
            "vrate",
            chart(
                "vrate and utilisation",
                time(),
                Axis::linear("percent").from_zero(),
                vec![
                    Series::new("vrate %", device(|p| p.vrate_pct)),
                    Series::new("utilisation %", device(|p| p.utilization * 100.0)),
                ],
            ),
        ),
        (
            "latency-dist",
            chart(
                "latency distribution",
                Axis::linear("percentile").tight().ticks(percentiles),
                Axis::log("latency").unit("µs"),
                dist,
            ),
        ),
    ]
}

/// Writes the charts of `report` into `dir` as `<prefix>-{iops,latency,vrate,latency-dist}.svg`;
/// returns the files written.
pub fn write_charts(report: &Report, dir: &Path, prefix: &str) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    for (name, chart) in charts(report) {
        let path = dir.join(format!("{prefix}-{name}.svg"));
        std::fs::write(&path, chart.to_svg(SIZE.0, SIZE.1))?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenarios;

    #[test]
    fn the_charts_show_every_group_on_the_report_axes() {
        let args = scenarios::Args { seconds: Some(3.0), ..Default::default() };
        let report = (scenarios::find("proportional").expect("built in").run)(&args).expect("runs").runs.remove(0);
        let charts = charts(&report);
        assert_eq!(
            charts.iter().map(|(name, _)| *name).collect::<Vec<_>>(),
            ["iops", "latency", "vrate", "latency-dist"]
        );
        for (name, chart) in &charts {
            let svg = chart.to_svg(SIZE.0, SIZE.1);
            assert!(svg.contains(&format!("{} ({}): ", report.scenario, report.controller)), "{name}: title");
            if *name != "vrate" {
                for g in &report.groups {
                    assert!(svg.contains(&format!(">{}</text>", g.path)), "{name}: legend {}", g.path);
                }
                assert_eq!(svg.matches("<path").count(), report.groups.len(), "{name}: a line per group");
            }
        }
        let dist = charts[3].1.to_svg(SIZE.0, SIZE.1);
        assert!(dist.contains(">p50</text>") && dist.contains(">p99</text>"), "percentile ticks");
        assert!(charts[1].1.to_svg(SIZE.0, SIZE.1).contains(">p99 latency (µs)</text>"));
    }
}
