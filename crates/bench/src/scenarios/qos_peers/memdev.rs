//! The engine's device for the scenario ([`MemoryDevice`]): a loop device (direct IO) over a sparse
//! file in `/dev/shm`. The real programs beside it read what costs their storage nothing — librbd
//! objects never written (the OSD answers without reading its disk), holes of the lab's sparse disk
//! file — so the engine gets a device just as fast: real io_uring, block layer and loop driver, with
//! latencies of microseconds, and none of this shared machine's disk stalls in the limiter's figures.
//! The file is removed and the device detached on drop (the loop device also by the kernel if the
//! process dies: autoclear).

use std::fs::File;
use std::path::PathBuf;

use ioshare_engine::target::Target;
use ioshare_host::LoopDevice;

/// Size of the file, bytes (sparse: nothing is allocated by reading it).
pub const SIZE: u64 = 1 << 30;

/// A loop device over a sparse file in `/dev/shm`, and the engine's target on it.
pub struct MemoryDevice {
    /// The engine's target (declared first: closed before the device is detached).
    pub target: Target,
    _device: LoopDevice,
    file: PathBuf,
}

impl MemoryDevice {
    /// Creates the file and attaches the device (root); `Err` says why it could not.
    pub fn new() -> Result<MemoryDevice, String> {
        let file = PathBuf::from(format!("/dev/shm/ioshare-qos-peers.{}", std::process::id()));
        let made = File::create(&file).and_then(|f| f.set_len(SIZE)).map_err(|e| format!("{}: {e}", file.display()));
        let attached = made.and_then(|()| LoopDevice::attach(&file, true).map_err(|e| e.to_string()));
        let device = match attached {
            Ok(device) => device,
            Err(why) => {
                let _ = std::fs::remove_file(&file);
                return Err(why);
            }
        };
        match Target::open_read_only(device.path(), SIZE) {
            Ok(target) => Ok(MemoryDevice { target, _device: device, file }),
            Err(e) => {
                drop(device);
                let _ = std::fs::remove_file(&file);
                Err(e.to_string())
            }
        }
    }
}

impl Drop for MemoryDevice {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
    }
}
