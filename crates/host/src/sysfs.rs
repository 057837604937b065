//! Reading and writing single kernel attribute files (sysfs, cgroupfs) with errors that name the file.
//!
//! Kernel attribute files take one value per `write(2)`: `std::fs::write` issues a single call for the
//! short values written here, and the kernel's errno is kept so callers can turn specific ones (ENODEV,
//! ESRCH, EINVAL) into precise errors.

use std::io;
use std::path::Path;

use crate::error::{Error, Result};

/// Writes `value` to the kernel file `path`, returning the raw OS error on failure.
pub(crate) fn write_raw(path: &Path, value: &str) -> io::Result<()> {
    std::fs::write(path, value)
}

/// Turns a failed access to `path` into an error: permission problems become "run as root".
pub(crate) fn file_error(action: String, path: &Path, source: io::Error) -> Error {
    match source.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            Error::PermissionDenied { action: format!("{action} {}", path.display()) }
        }
        _ => Error::KernelFile { action: format!("cannot {action}"), path: path.to_path_buf(), source },
    }
}

/// Writes `value` to the kernel file `path`.
pub(crate) fn write(path: &Path, value: &str) -> Result<()> {
    write_raw(path, value).map_err(|e| file_error(format!("write '{value}' to"), path, e))
}

/// Reads the kernel file `path`.
pub(crate) fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| file_error("read".to_string(), path, e))
}
