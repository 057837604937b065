//! `ioshare tune --kernel`: the tuner's points run under the kernel's IOCost instead of ioshare's
//! inline one. The tune crate asks a [`Runner`] to run its tenants with a pair of pinned lines (or
//! uncontrolled); this one hands them to the kernel peers ([`Peers`]): each tenant in its own worker
//! process and cgroup v2 with its weight as `io.weight`, the device's `io.cost.model` and
//! `io.cost.qos` set to the point's lines for the run ([`KernelSetup::PinnedIoCost`]) and written back
//! after it, the kernel's vrate read from `io.stat` while it runs; an uncontrolled run is
//! [`KernelSetup::Plain`] (the same cgroups and workers, iocost off). Same lines, same tenants, same
//! judging: only the controller differs.
//!
//! The kernel's IOCost exists only in cgroup v2 with the `io` controller (this project's host binds
//! `blkio` to v1: the lab guest, `scripts/lab`, has it); [`check`] says why not before anything is
//! created. Cleanup is the peers': drop guards restore `io.cost.*`, the device's scheduler, remove the
//! cgroups and reap the workers, on errors and Ctrl-C too (a Ctrl-C also reaches the workers, which
//! stop and report; no further run starts).

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};

use ioshare_engine::{RunOptions, RunReport, Target, TenantSpec};
use ioshare_host::{is_root, Capabilities};
use ioshare_tune::data::ControlledBy;
use ioshare_tune::runner::{Control, Pinned, Runner};

use crate::kernel::{KernelSetup, Peers};

/// The kernel's IOCost in control of a sweep's points.
pub struct KernelControl {
    /// The command that starts a kernel-peer worker (`ioshare bench --worker`).
    pub worker: Vec<String>,
}

/// Why this host cannot run `--kernel`, with what to do instead; `Ok` when it can.
pub fn check() -> Result<(), String> {
    if !is_root() {
        return Err(
            "--kernel needs root: it writes the device's io.cost.model and io.cost.qos and makes cgroups".into()
        );
    }
    let caps = Capabilities::probe();
    if caps.io_v2() && caps.io_cost {
        return Ok(());
    }
    let has = match (&caps.cgroup_v2, caps.io_v2()) {
        (None, _) => "no cgroup v2 hierarchy".to_string(),
        (Some(root), false) => format!("cgroup v2 at {} without the io controller", root.display()),
        (Some(root), true) => format!("cgroup v2 at {} without the kernel's iocost (no io.cost.qos)", root.display()),
    };
    Err(format!(
        "--kernel needs the kernel's IOCost, in cgroup v2 with the io controller, and this host has {has}: run it in \
         the lab guest (scripts/lab --iops 3000 -- ioshare tune /dev/nvme0n1 --destructive --kernel) or on a cgroup \
         v2 host, or drop --kernel to tune with ioshare's IOCost inline"
    ))
}

impl Control for KernelControl {
    fn controlled_by(&self) -> ControlledBy {
        ControlledBy::Kernel
    }

    fn open<'a>(&self, target: &'a Target, stop: &'a AtomicBool) -> ioshare_tune::Result<Box<dyn Runner + 'a>> {
        // Checked again here: cgroup v2 with iocost makes the peers use v2 and the kernel's IOCost.
        check().map_err(ioshare_tune::Error::Control)?;
        // What a SIGKILLed run left (a sweep is hundreds of runs).
        let _ = ioshare_host::remove_stale_cgroups2("ioshare-bench-");
        let peers = Peers::prepare(target.path(), &self.worker)
            .map_err(ioshare_tune::Error::Control)?
            .ok_or_else(|| ioshare_tune::Error::Control("--kernel: no worker command to start the tenants".into()))?;
        Ok(Box::new(KernelRunner { peers: RefCell::new(peers), stop }))
    }
}

/// The kernel peers on the sweep's device.
struct KernelRunner<'a> {
    peers: RefCell<Peers>,
    stop: &'a AtomicBool,
}

impl Runner for KernelRunner<'_> {
    fn run(
        &self,
        pinned: Option<&Pinned>,
        tenants: &[TenantSpec],
        opts: &RunOptions,
    ) -> ioshare_tune::Result<RunReport> {
        // Workers catch Ctrl-C only while they run: none is started after it.
        if self.stop.load(Ordering::Relaxed) {
            return Ok(RunReport { interrupted: true, ..RunReport::default() });
        }
        let setup = setup(pinned);
        let mut peers = self.peers.borrow_mut();
        peers.run(&setup, None, tenants, opts).map_err(|e| match e {
            crate::Error::Engine(e) => ioshare_tune::Error::Engine(e),
            e => ioshare_tune::Error::Control(format!("{} on {}: {e}", setup.name(), peers.device().display())),
        })
    }
}

/// The kernel setup of a run: the pinned lines, or nothing at all.
fn setup(pinned: Option<&Pinned>) -> KernelSetup {
    match pinned {
        Some(p) => KernelSetup::PinnedIoCost { model: p.model, qos: p.qos },
        None => KernelSetup::Plain,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ioshare_core::{ModelParams, QosParams};

    #[test]
    fn a_pinned_point_runs_under_the_kernels_iocost_with_the_same_lines_and_none_runs_plain() {
        let p = Pinned::at(&ModelParams::SSD_DFL, &QosParams::default(), 50.0);
        assert_eq!(setup(Some(&p)), KernelSetup::PinnedIoCost { model: ModelParams::SSD_DFL.scaled(0.5), qos: p.qos });
        assert_eq!(setup(None), KernelSetup::Plain);
    }
}
