//! The real programs ioshare's limiters restate, run by the project's scripts: QEMU's block throttle
//! (fio in the lab guest, `scripts/lab --throttle`, on a disk QEMU throttles) and librbd's QoS (fio
//! `ioengine=rbd` against the one-node cluster of `scripts/ceph`, the QoS set on the image with
//! `rbd config image set`). Both report fio's `json+` output, whose latency histogram
//! ([`FioRun::dist`]) is read here. A program that cannot run gives the one-line reason of its script.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use super::dist::Dist;
use super::Case;

/// What fio measured for one job.
#[derive(Clone, Debug)]
pub struct FioRun {
    /// IOs completed per second.
    pub iops: f64,
    /// Mean latency (submission to completion), µs.
    pub mean_us: f64,
    /// Completion-latency histogram (fio's `clat_ns` bins).
    pub dist: Dist,
}

/// The project's `scripts/` (`IOSHARE_SCRIPTS`, else beside the sources this was built from).
pub fn scripts_dir() -> PathBuf {
    std::env::var_os("IOSHARE_SCRIPTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts"))
}

/// `scripts/NAME --check`: `Ok` when it can run here, else its one-line reason.
fn check(name: &str) -> Result<PathBuf, String> {
    let script = scripts_dir().join(name);
    if !script.is_file() {
        return Err(format!("{} not found (set IOSHARE_SCRIPTS to the project's scripts/)", script.display()));
    }
    let out = Command::new(&script).arg("--check").output().map_err(|e| format!("{}: {e}", script.display()))?;
    if out.status.success() {
        Ok(script)
    } else {
        Err(String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("cannot run").trim().to_string())
    }
}

/// fio's options for the scenario's reader on `target` (`--filename=…` or the rbd engine's).
fn fio_job(target: &[String], seconds: u64) -> Vec<String> {
    let mut args: Vec<String> =
        ["fio", "--name=qos", "--rw=randread", "--bs=4k", "--iodepth=128", "--time_based"].map(String::from).to_vec();
    args.extend(target.iter().cloned());
    args.push(format!("--runtime={seconds}"));
    args.push("--output-format=json+".into());
    args
}

/// QEMU's throttle, for real: fio in the lab guest on its NVMe disk throttled as `case` says.
pub fn qemu(case: &Case, seconds: u64) -> Result<FioRun, String> {
    let lab = check("lab")?;
    let target = ["--filename=/dev/nvme0n1", "--direct=1", "--ioengine=io_uring"].map(String::from);
    let out = Command::new(lab)
        .args(["--no-ioshare", "--throttle", &case.qemu_throttle(), "--"])
        .args(fio_job(&target, seconds))
        .output()
        .map_err(|e| format!("scripts/lab: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        return Err(format!("scripts/lab failed: {}", why.lines().last().unwrap_or("no output").trim()));
    }
    parse(&text)
}

/// librbd's QoS, for real: one cluster, fio's rbd engine once per case, the image's QoS set first.
pub fn librbd(cases: &[Case], seconds: u64) -> Vec<Result<FioRun, String>> {
    let ceph = match check("ceph") {
        Ok(script) => script,
        Err(why) => return cases.iter().map(|_| Err(why.clone())).collect(),
    };
    let out_dir = std::env::temp_dir().join(format!("ioshare-qos-peers.{}", std::process::id()));
    let result = run_librbd(&ceph, cases, seconds, &out_dir);
    let _ = std::fs::remove_dir_all(&out_dir);
    match result {
        Ok(runs) => runs,
        Err(why) => cases.iter().map(|_| Err(why.clone())).collect(),
    }
}

fn run_librbd(
    ceph: &std::path::Path,
    cases: &[Case],
    seconds: u64,
    out_dir: &std::path::Path,
) -> Result<Vec<Result<FioRun, String>>, String> {
    std::fs::create_dir_all(out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    let target = ["--ioengine=rbd", "--clientname=admin", "--pool=rbd", "--rbdname=img"].map(String::from);
    let mut script = String::from("set -e\n");
    for (i, case) in cases.iter().enumerate() {
        for (key, value) in case.rbd_config() {
            script.push_str(&format!("rbd config image set rbd/img {key} {value}\n"));
        }
        let out = out_dir.join(format!("{i}.json"));
        script.push_str(&format!("{} --output={}\n", fio_job(&target, seconds).join(" "), out.display()));
    }
    let out = Command::new(ceph)
        .args(["--no-mgr", "--", "sh", "-c", &script])
        .output()
        .map_err(|e| format!("scripts/ceph: {e}"))?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        return Err(format!("scripts/ceph failed: {}", why.lines().last().unwrap_or("no output").trim()));
    }
    Ok((0..cases.len())
        .map(|i| {
            let path = out_dir.join(format!("{i}.json"));
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display())).and_then(|t| parse(&t))
        })
        .collect())
}

/// fio's `json+` output (anything before its opening brace is skipped): the first job's reads.
pub fn parse(text: &str) -> Result<FioRun, String> {
    let start = text.find('{').ok_or("fio printed no JSON")?;
    let v: Value = serde_json::from_str(&text[start..]).map_err(|e| format!("fio's JSON: {e}"))?;
    let read = &v["jobs"][0]["read"];
    if !read["clat_ns"]["bins"].is_object() {
        return Err("fio's JSON has no clat_ns.bins (needs json+)".into());
    }
    let dist = Dist::new(Dist::fio_bins(&read["clat_ns"]));
    let iops = read["iops"].as_f64().ok_or("fio's JSON has no read iops")?;
    let mean_us = read["lat_ns"]["mean"].as_f64().ok_or("fio's JSON has no lat_ns.mean")? / 1e3;
    if dist.is_empty() {
        return Err("fio completed no read".into());
    }
    Ok(FioRun { iops, mean_us, dist })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fio_json_plus_gives_rate_mean_and_histogram() {
        let text = r#"lab noise
{"jobs": [{"read": {"iops": 5012.5, "lat_ns": {"mean": 25600000.0},
  "clat_ns": {"bins": {"50000": 3, "48000000": 1}}}}]}"#;
        let run = parse(text).unwrap();
        assert_eq!((run.iops, run.mean_us, run.dist.total()), (5012.5, 25_600.0, 4.0));
        assert_eq!(run.dist.quantile(0.75), 50.0);
        assert!(parse("{\"jobs\": [{\"read\": {\"iops\": 1}}]}").unwrap_err().contains("json+"));
        assert!(parse("no json").is_err());
    }
}
