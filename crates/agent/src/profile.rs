//! The seam where `model = "profile"` gets a device's cost model measured.
//!
//! Measuring a device (`ioshare profile`) belongs to the engine and is being built separately; until
//! it exists here, "profile" is refused at validation with an error saying what to use instead. When
//! the profiler lands, [`measure_model`] calls it (read-only on a device in use) and the agent
//! caches the result.

use ioshare_core::ModelParams;
use ioshare_host::DiskId;

/// Measures `device`'s cost model, or says why that is not possible.
pub fn measure_model(device: &DiskId) -> Result<ModelParams, String> {
    Err(format!(
        "measuring {} is not available in this build yet: run `ioshare profile` on the device when it exists, \
         and give its io.cost.model line, or a built-in set (hdd, ssd_qd1, ssd_dfl, ssd_fast)",
        device.name
    ))
}
