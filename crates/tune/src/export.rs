//! A result's solutions in the three forms an operator applies them in: the kernel's
//! `io.cost.model` + `io.cost.qos` lines, the agent's `[[devices]]` entries, and a systemd hwdb
//! fragment (`IOCOST_SOLUTIONS`, `IOCOST_MODEL_<SOL>`, `IOCOST_QOS_<SOL>`, the lines without
//! `MAJ:MIN`) keyed by the device's model string, which systemd's `iocost` tool reads.

use std::fmt::Write;

use crate::data::DeviceId;
use crate::result::DEFAULT_SOLUTION;
use crate::solve::Solution;

/// A line without its leading `MAJ:MIN`, if it has one.
pub fn without_device(line: &str) -> &str {
    match line.split_once(' ') {
        Some((first, rest)) if first.contains(':') && !first.contains('=') => rest,
        _ => line,
    }
}

/// The kernel lines of each solution, to write into cgroup v2's root `io.cost.model` and `io.cost.qos`.
pub fn kernel_lines(solutions: &[Solution]) -> String {
    let mut s = String::new();
    for sol in solutions {
        let _ = writeln!(s, "# {} (vrate {:.1}%)", sol.name, sol.vrate_pct);
        let _ = writeln!(s, "io.cost.model: {}", sol.model_line);
        let _ = writeln!(s, "io.cost.qos:   {}", sol.qos_line);
    }
    s
}

/// The agent's `[[devices]]` entry for `sol` on `device` (TOML).
pub fn agent_devices(device: &DeviceId, sol: &Solution) -> String {
    let path = device.dev.as_deref().map_or("/dev/DEVICE".to_string(), str::to_string);
    format!(
        "[[devices]]   # tune solution {} (vrate {:.1}%)\npath = \"{path}\"\nmodel = \"{}\"\nqos = \"{}\"\n",
        sol.name,
        sol.vrate_pct,
        without_device(&sol.model_line),
        without_device(&sol.qos_line)
    )
}

/// The hwdb fragment for `device` with every solution, `isolated-bandwidth` listed first (systemd's
/// default `TargetSolution`).
pub fn hwdb(device: &DeviceId, solutions: &[Solution]) -> String {
    let key = |name: &str| name.to_uppercase().replace('-', "_");
    let mut names: Vec<&str> = solutions.iter().map(|s| s.name.as_str()).collect();
    names.sort_by_key(|n| *n != DEFAULT_SOLUTION);
    let mut s = format!(
        "# ioshare tune: {} ({}, {} bytes)\nblock:devname:*:name:{}:fwrev:*:\n IOCOST_SOLUTIONS={}\n",
        device.model,
        device.kind,
        device.size,
        device.model,
        names.join(" ")
    );
    for sol in solutions {
        let _ = writeln!(s, " IOCOST_MODEL_{}={}", key(&sol.name), without_device(&sol.model_line));
        let _ = writeln!(s, " IOCOST_QOS_{}={}", key(&sol.name), without_device(&sol.qos_line));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::solve::Predicted;

    fn sol(name: &str) -> Solution {
        Solution {
            name: name.into(),
            vrate_pct: 87.5,
            model_line: "7:3 ctrl=user model=linear rbps=1 rseqiops=2 rrandiops=3 wbps=4 wseqiops=5 wrandiops=6".into(),
            qos_line: "7:3 enable=1 ctrl=user rpct=0.00 rlat=900 wpct=0.00 wlat=900 min=100.00 max=100.00".into(),
            predicted: Predicted::default(),
        }
    }

    #[test]
    fn the_three_forms_carry_the_same_lines() {
        let dev = DeviceId {
            name: Some("loop3".into()),
            dev: Some("7:3".into()),
            kind: "loop device over a file".into(),
            model: "vda".into(),
            size: 1 << 30,
        };
        let sols = [sol("bandwidth"), sol("isolated-bandwidth")];
        let k = kernel_lines(&sols);
        assert!(k.contains("io.cost.model: 7:3 ctrl=user") && k.contains("# isolated-bandwidth (vrate 87.5%)"), "{k}");
        let a = agent_devices(&dev, &sols[1]);
        assert!(a.contains("path = \"7:3\"") && a.contains("model = \"ctrl=user model=linear rbps=1"), "{a}");
        let h = hwdb(&dev, &sols);
        assert!(h.contains(" IOCOST_SOLUTIONS=isolated-bandwidth bandwidth\n"), "{h}");
        assert!(h.contains(" IOCOST_QOS_ISOLATED_BANDWIDTH=enable=1 ctrl=user rpct=0.00"), "{h}");
        assert!(h.contains("name:vda:fwrev:*:"), "{h}");
        assert_eq!(without_device("enable=1 ctrl=user"), "enable=1 ctrl=user");
    }
}
