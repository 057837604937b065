//! The kernel IOCost's decisions in a `kernel-iocost` run, replayed through ioshare's planner rules:
//! the exact half of the fidelity comparison. Outcomes (IOPS ratios) differ between the kernel's own
//! runs by 20–40% in the emulated lab guest; each period's decision — busy level and vrate step,
//! from the inputs the kernel had — can be compared exactly ([`ioshare_core::iocost::replay`]). The
//! kernel's periods come from its `iocost_ioc_vrate_adj` tracepoint ([`IocostObserver`]).

use ioshare_core::iocost::line::DevNum;
use ioshare_core::iocost::model::VTIME_PER_USEC;
use ioshare_core::iocost::replay::{replay, replay_donations, Cause};
use ioshare_core::iocost::tree::WEIGHT_ONE;
use ioshare_observe::iocost::IocostObserver;

/// Differences listed in a run's note, at most.
const LISTED: usize = 5;

/// Records one run's periods on one device.
pub struct DecisionRecorder {
    observer: std::result::Result<IocostObserver, String>,
    /// `MAJOR << 20 | MINOR`, as the kernel's records carry it.
    dev: u32,
    name: String,
}

impl DecisionRecorder {
    /// Starts recording device `dev`; a host that cannot trace says why in the note.
    pub fn start(dev: DevNum) -> DecisionRecorder {
        DecisionRecorder {
            observer: IocostObserver::start().map_err(|e| e.to_string()),
            dev: dev.major << 20 | dev.minor,
            name: dev.to_string(),
        }
    }

    /// The run's note: periods replayed, those decided as the kernel did, and the first differences.
    pub fn finish(self) -> String {
        let mut observer = match self.observer {
            Ok(o) => o,
            Err(e) => return format!("kernel-iocost decisions not recorded: {e}"),
        };
        let (recorded, lost) = match observer.take_decisions() {
            Ok(p) => p,
            Err(e) => return format!("kernel-iocost decisions not recorded: {e}"),
        };
        let mine = recorded.of_device(self.dev);
        let r = replay(&mine.periods);
        let d = replay_donations(&mine.donations);
        let pct = |v: u64| v as f64 * 100.0 / VTIME_PER_USEC as f64;
        let mut line = format!(
            "kernel-iocost decisions on {}, replayed through ioshare's planner rules: {} of {} periods identical \
             (busy level and vrate step), {} of {} donation decisions ({} donors; otherwise {} read after IOs \
             moved the budget, {} the kernel's 32-bit overflow, {} by the rules){}",
            self.name,
            r.identical,
            r.periods,
            d.identical,
            d.decisions,
            d.donors,
            d.count(Cause::Raced),
            d.count(Cause::KernelUsageOverflow),
            d.count(Cause::Rules),
            if lost > 0 { format!("; {lost} decisions lost") } else { String::new() }
        );
        for d in r.differences.iter().take(LISTED) {
            let k = &d.kernel;
            line += &format!(
                "; period {}: from level {} the kernel chose {} and vrate {:.2}%, ioshare {} and {:.2}% (missed \
                 {}/{} ppm, rq-wait {}%, lagging {}, short {})",
                k.period,
                d.prev_busy_level,
                k.busy_level,
                pct(k.new_vrate),
                d.busy_level,
                pct(d.vrate),
                k.missed_ppm[0],
                k.missed_ppm[1],
                k.rq_wait_pct,
                k.nr_lagging,
                k.nr_shortages
            );
        }
        for x in d.differences.iter().filter(|x| x.cause == Cause::Rules).take(LISTED) {
            line += &format!(
                "; period {} cgroup {}: the kernel {} at a target of {} (of {}), ioshare {} at {}",
                x.kernel.period,
                x.kernel.cgroup,
                if x.kernel.donated { "donated" } else { "kept its weight" },
                x.kernel.new_hwi,
                WEIGHT_ONE,
                if x.donates { "donated" } else { "kept its weight" },
                x.new_hwi
            );
        }
        line
    }
}
