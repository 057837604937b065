//! Small costs measured by turns within one run: the thing measured (the eBPF observer, a controller)
//! is switched on and off every [`TOGGLE_WINDOW`], and each on window's IOPS is compared with the
//! off windows on either side of it ([`compare_windows`]); the estimate is the geometric mean of
//! those ratios ([`overhead_estimate`]). Separate runs a few seconds apart cannot judge a 3% cost on
//! this kind of shared virtual disk: two identical back-to-back runs differ by up to ±8%, and a run
//! with nothing attached read 95% of the run before it. One window's ratio scatters as much (5-8%),
//! but the windows are many, paired with their own neighbours, and average out: over a 30 s run the
//! estimate's standard error is ~0.7%.

use std::time::Duration;

use ioshare_core::{Nanos, NSEC_PER_MSEC};
use ioshare_engine::report::RunReport;

use crate::stats::median;

/// How long the measured thing stays on, then off. Shorter windows pair closer neighbours: on this
/// machine's disk the on-to-off ratio of one window (with nothing measured: an observer whose programs
/// return at once) scattered by 7.5% at 100 ms windows, 5.6% at 250 ms and 4.5% at 500 ms, so that per
/// second of run 100 ms windows judge most precisely.
pub const TOGGLE_WINDOW: Duration = Duration::from_millis(100);
/// The engine's sample interval in a toggled run: several samples per window, so that the one a
/// toggle touches can be left out.
pub const TOGGLE_SAMPLE: Nanos = 25 * NSEC_PER_MSEC;

/// One window of a toggled run: seconds on the run's clock, and whether the measured thing was on
/// throughout (the toggles themselves lie between windows).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    /// Start, s.
    pub from: f64,
    /// End, s.
    pub to: f64,
    /// On (the observer's programs attached, the controller deciding).
    pub on: bool,
    /// CPU time the run's IO thread spent in the window, ns (`None`: not readable).
    pub cpu_ns: Option<u64>,
}

/// An on window against the off windows on either side of it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Comparison {
    /// Its IOPS over theirs (geometric mean).
    pub iops_ratio: f64,
    /// The IO thread's CPU per IO in it minus theirs (mean), ns: where the measured thing's time goes.
    pub extra_cpu_ns_per_io: Option<f64>,
}

/// The CPU-time clock of a thread of this process, readable from any of its threads (exact: the
/// kernel adds the running slice when it is read).
#[derive(Clone, Copy, Debug)]
pub struct ThreadCpuClock(libc::clockid_t);

impl ThreadCpuClock {
    /// The calling thread's clock (`None` if the kernel gives none).
    pub fn of_this_thread() -> Option<ThreadCpuClock> {
        let mut id: libc::clockid_t = 0;
        // SAFETY: pthread_self() is the calling thread; `id` is a valid place for the clock id.
        let ret = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) };
        (ret == 0).then_some(ThreadCpuClock(id))
    }

    /// CPU time so far, ns.
    pub fn now_ns(self) -> Option<u64> {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a valid timespec for the kernel to fill in.
        let ret = unsafe { libc::clock_gettime(self.0, &mut ts) };
        (ret == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    }
}

/// Per on window that ends after `warmup_s`, against the off windows just before and after it
/// (either one at the run's ends): its IOPS (all tenants, over the samples wholly inside it, so none
/// a toggle touched) over their geometric mean (an arithmetic mean would tilt the geometric mean of
/// the ratios towards the off side by about a quarter of their variance), and its IO thread's
/// CPU per IO (the window's CPU time over its IOPS × length) minus their mean. Windows that hold no
/// whole sample, or in which no IO completed (a stall of the disk), are left out.
pub fn compare_windows(report: &RunReport, windows: &[Window], warmup_s: f64) -> Vec<Comparison> {
    let iops = |w: &Window| -> Option<f64> {
        let from = w.from.max(warmup_s);
        let v: f64 = report.tenants.iter().map(|t| t.window_iops(from, w.to)).sum();
        (v.is_finite() && v > 0.0).then_some(v)
    };
    let rates: Vec<Option<f64>> = windows.iter().map(iops).collect();
    let cpu_per_io = |i: usize| {
        Some(windows[i].cpu_ns? as f64 / (rates[i]? * (windows[i].to - windows[i].from))).filter(|c| c.is_finite())
    };
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let mut compared = Vec::new();
    for (i, _) in windows.iter().enumerate().filter(|(_, w)| w.on) {
        let neighbours: Vec<usize> =
            [i.checked_sub(1), Some(i + 1)].into_iter().flatten().filter(|&j| j < windows.len()).collect();
        let off: Vec<f64> = neighbours.iter().filter_map(|&j| rates[j].map(f64::ln)).collect();
        let (Some(on), Some(off)) = (rates[i], mean(&off).map(f64::exp)) else { continue };
        let off_cpu: Vec<f64> = neighbours.iter().filter_map(|&j| cpu_per_io(j)).collect();
        compared.push(Comparison {
            iops_ratio: on / off,
            extra_cpu_ns_per_io: cpu_per_io(i).zip(mean(&off_cpu)).map(|(on, off)| on - off),
        });
    }
    compared
}

/// The estimate of a cost from the windows' ratios, in run order: their geometric mean (a
/// window's ratio is as likely x as 1/x when nothing differs) and its standard error, as factors
/// (0.98, 0.01). Consecutive ratios share an off window, so the error is widened by their lag-1
/// correlation (variance of the mean × (1 + 2ρ), ρ ≥ 0). `None` without windows.
pub fn overhead_estimate(ratios: &[f64]) -> Option<(f64, f64)> {
    if ratios.is_empty() {
        return None;
    }
    let logs: Vec<f64> = ratios.iter().map(|r| r.ln()).collect();
    let n = logs.len() as f64;
    let mean = logs.iter().sum::<f64>() / n;
    let dev: Vec<f64> = logs.iter().map(|l| l - mean).collect();
    let ss: f64 = dev.iter().map(|d| d * d).sum();
    let var = ss / (n - 1.0).max(1.0);
    let rho = if ss > 0.0 { dev.windows(2).map(|w| w[0] * w[1]).sum::<f64>() / ss } else { 0.0 };
    Some((mean.exp(), mean.exp() * (var / n * (1.0 + 2.0 * rho.max(0.0))).sqrt()))
}

/// The IOPS ratios of `compared` windows.
pub fn iops_ratios(compared: &[Comparison]) -> Vec<f64> {
    compared.iter().map(|c| c.iops_ratio).collect()
}

/// The median of the windows' ratios with a distribution-free ~95% confidence interval (the order
/// statistics n/2 ∓ 0.98·√n): (median, low, high). Robust where single windows go astray — a dip of a
/// shared disk to a fifth of its rate for 50-150 ms lands in a few windows and not their neighbours,
/// and moves a mean of the ratios by more than the cost judged, the median not at all. `None` without
/// windows.
pub fn median_estimate(ratios: &[f64]) -> Option<(f64, f64, f64)> {
    let mut sorted: Vec<f64> = ratios.iter().copied().filter(|r| r.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let mid = *sorted.get(n / 2)?;
    let half = (0.98 * (n as f64).sqrt()).ceil() as usize;
    Some((mid, sorted[(n / 2).saturating_sub(half)], sorted[(n / 2 + half).min(n - 1)]))
}

/// [`median_estimate`] in words: "99.1% (97.9-100.4%) over 224 windows", with the IO thread's extra
/// CPU per IO while on (median over the windows) where it was read. `None` without windows.
pub fn median_text(compared: &[Comparison]) -> Option<String> {
    let (mid, low, high) = median_estimate(&iops_ratios(compared))?;
    let extra: Vec<f64> = compared.iter().filter_map(|c| c.extra_cpu_ns_per_io).collect();
    let cpu = median(&extra).map_or(String::new(), |m| format!(", CPU per IO {m:+.0} ns"));
    Some(format!("{:.1}% ({:.1}-{:.1}%) over {} windows{cpu}", mid * 100.0, low * 100.0, high * 100.0, compared.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run sampled every 25 ms at `iops(t)` for the sample ending at t (ms).
    fn sampled(until_ms: u32, iops: impl Fn(u32) -> f64) -> RunReport {
        let mut r = RunReport::default();
        let series = (1..=until_ms / 25)
            .map(|k| ioshare_engine::report::TenantSample {
                t_s: f64::from(k * 25) / 1000.0,
                iops: iops(k * 25),
                ..Default::default()
            })
            .collect();
        r.tenants.push(ioshare_engine::report::TenantReport { series, ..Default::default() });
        r
    }

    /// Windows of 100 ms in turns, off first, each toggle taking 1 ms; the IO thread spends `cpu_ns`
    /// in each.
    fn windows(n: u32, cpu_ns: impl Fn(bool) -> u64) -> Vec<Window> {
        (0..n)
            .map(|k| Window {
                from: f64::from(k) * 0.1 + 0.001,
                to: f64::from(k + 1) * 0.1,
                on: k % 2 == 1,
                cpu_ns: Some(cpu_ns(k % 2 == 1)),
            })
            .collect()
    }

    #[test]
    fn on_windows_are_compared_with_their_off_neighbours() {
        // 1000 IOPS while off, 960 while on; the samples a toggle touches (the first of each
        // window, which starts 1 ms before the window does) read 0 and must be left out.
        let on = |t: u32| (t - 1) / 100 % 2 == 1;
        let run = sampled(600, |t| match (t % 100 == 25, on(t)) {
            (true, _) => 0.0,
            (false, true) => 960.0,
            (false, false) => 1000.0,
        });
        // The IO thread: 0.099 s × 1000 IOPS × 4000 ns off, 0.099 × 960 × 4500 on.
        let cpu = |on: bool| if on { 99 * 960 * 4500 / 1000 } else { 99 * 1000 * 4000 / 1000 };
        let compared = compare_windows(&run, &windows(6, cpu), 0.0);
        assert_eq!(compared.len(), 3, "{compared:?}");
        for c in &compared {
            assert!((c.iops_ratio - 0.96).abs() < 1e-12, "{c:?}");
            assert!((c.extra_cpu_ns_per_io.unwrap() - 500.0).abs() < 1e-6, "{c:?}");
        }
        // A slow drift cancels: each on window is held against both neighbours (their geometric
        // mean lies within 0.4% of their midpoint here, 1075 and 1275 around 1175).
        let drifting = sampled(600, |t| if on(t) { 0.96 } else { 1.0 } * (1000.0 + f64::from(t)));
        let ratios = iops_ratios(&compare_windows(&drifting, &windows(6, cpu), 0.0));
        assert!(ratios.iter().take(2).all(|r| (r - 0.96).abs() < 0.004), "{ratios:?}");
        // A window in which nothing completed (a stalled disk) is left out instead of reading 0.
        let stalled = sampled(600, |t| if (t - 1) / 100 == 3 { 0.0 } else { 1000.0 });
        assert_eq!(compare_windows(&stalled, &windows(6, cpu), 0.0).len(), 2);
        // Windows before the warm-up's end are not judged.
        assert_eq!(compare_windows(&run, &windows(6, cpu), 0.4).len(), 1);
    }

    #[test]
    fn the_estimate_is_the_geometric_mean_with_its_standard_error() {
        // Ratios x and 1/x (noise only) average to exactly 1.
        let (m, se) = overhead_estimate(&[1.1, 1.0 / 1.1, 1.05, 1.0 / 1.05]).unwrap();
        assert!((m - 1.0).abs() < 1e-12 && se > 0.0, "{m} {se}");
        let (m, se) = overhead_estimate(&[0.97; 5]).unwrap();
        assert!((m - 0.97).abs() < 1e-12 && se.abs() < 1e-12);
        // Runs of similar ratios (neighbours sharing a window) widen the error: the same values in an
        // order where each follows a like one give a larger error than alternating.
        let alternating = overhead_estimate(&[0.9, 1.1, 0.9, 1.1, 0.9, 1.1]).unwrap().1;
        let runs = overhead_estimate(&[0.9, 0.9, 0.9, 1.1, 1.1, 1.1]).unwrap().1;
        assert!(runs > alternating * 1.2, "{runs} vs {alternating}");
        assert_eq!(overhead_estimate(&[]), None);
    }

    #[test]
    fn the_median_ignores_a_dip_that_moves_the_geometric_mean() {
        // 40 windows at 99% and 10 in which the disk dipped (a third or three times the neighbours').
        let mut ratios = vec![0.99; 40];
        ratios.extend([0.33, 3.0, 0.33, 0.33, 0.33, 0.33, 0.33, 0.33, 3.0, 0.33]);
        let (mid, low, high) = median_estimate(&ratios).unwrap();
        assert_eq!((mid, low, high), (0.99, 0.99, 0.99));
        assert!(overhead_estimate(&ratios).unwrap().0 < 0.90, "the mean of the logs follows the dips");
        // The interval spans ⌈0.98·√n⌉ ranks either side of the middle, within the data.
        let spread: Vec<f64> = (0..9).map(|k| 0.95 + 0.01 * f64::from(k)).collect();
        assert_eq!(median_estimate(&spread), Some((0.99, 0.96, 1.02)));
        assert_eq!(median_estimate(&[1.01]), Some((1.01, 1.01, 1.01)));
        assert_eq!(median_estimate(&[]), None);
        let c = |iops_ratio: f64| Comparison { iops_ratio, extra_cpu_ns_per_io: Some(40.0) };
        let text = median_text(&[c(0.98), c(1.0), c(0.99)]).unwrap();
        assert_eq!(text, "99.0% (98.0-100.0%) over 3 windows, CPU per IO +40 ns");
    }
}
