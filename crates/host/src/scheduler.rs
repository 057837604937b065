//! Switching the IO scheduler of one block device and restoring it afterwards: shared by
//! [`crate::LoopDevice`] (loop devices outlive their attachment) and [`crate::BlockDevice`] (a whole
//! disk named by the user, or the lab guest's data disk).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::sysfs;

/// The `queue/scheduler` file of one device and the scheduler it had before the first change.
#[derive(Debug)]
pub(crate) struct SchedulerSwitch {
    /// `/sys/.../queue/scheduler`.
    file: PathBuf,
    /// The device node, for error messages.
    device: PathBuf,
    /// The scheduler before [`SchedulerSwitch::set`] first changed it.
    original: Mutex<Option<String>>,
}

impl SchedulerSwitch {
    /// The switch of the device whose sysfs directory is `sys_dir` (node `device`).
    pub(crate) fn new(sys_dir: &Path, device: &Path) -> Self {
        SchedulerSwitch {
            file: sys_dir.join("queue/scheduler"),
            device: device.to_path_buf(),
            original: Mutex::new(None),
        }
    }

    /// The device's current IO scheduler (`none`, `mq-deadline`, `bfq`, ...).
    pub(crate) fn current(&self) -> Result<String> {
        let text = sysfs::read(&self.file)?;
        Ok(parse_scheduler(&text).0.unwrap_or("none").to_string())
    }

    /// Switches to `name`, remembering the original scheduler the first time.
    pub(crate) fn set(&self, name: &str) -> Result<()> {
        let before = sysfs::read(&self.file)?;
        let (current, available) = parse_scheduler(&before);
        let mut original = self.original.lock().unwrap_or_else(|p| p.into_inner());
        if original.is_none() {
            *original = Some(current.unwrap_or("none").to_string());
        }
        let unavailable = || Error::SchedulerUnavailable {
            device: self.device.clone(),
            name: name.to_string(),
            available: available.join(" "),
        };
        match sysfs::write_raw(&self.file, name) {
            Ok(()) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOENT)) => return Err(unavailable()),
            Err(e) => return Err(sysfs::file_error(format!("write '{name}' to"), &self.file, e)),
        }
        match parse_scheduler(&sysfs::read(&self.file)?).0 {
            Some(now) if now == name => Ok(()),
            _ => Err(unavailable()),
        }
    }

    /// Puts the original scheduler back, if it was changed. Best effort: a failure is printed.
    pub(crate) fn restore(&mut self) {
        let original = self.original.get_mut().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(original) = original {
            if let Err(e) = sysfs::write(&self.file, &original) {
                eprintln!("ioshare-host: cannot restore the scheduler of {}: {e}", self.device.display());
            }
        }
    }
}

/// Splits a `queue/scheduler` line like `none [mq-deadline] bfq` into the current scheduler (the
/// bracketed one; none when the device has no choice) and all available ones.
pub fn parse_scheduler(text: &str) -> (Option<&str>, Vec<&str>) {
    let mut current = None;
    let available = text
        .split_whitespace()
        .map(|word| match word.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
            Some(name) => {
                current = Some(name);
                name
            }
            None => word,
        })
        .collect();
    (current, available)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheduler_line_names_current_and_available() {
        let (current, available) = parse_scheduler("[none] mq-deadline kyber bfq \n");
        assert_eq!(current, Some("none"));
        assert_eq!(available, ["none", "mq-deadline", "kyber", "bfq"]);
        let (current, _) = parse_scheduler("none mq-deadline kyber [bfq]\n");
        assert_eq!(current, Some("bfq"));
        assert_eq!(parse_scheduler("none\n").0, None);
    }
}
