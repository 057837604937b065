//! Small value types shared by the scenario description, readable from TOML in the kernel's text
//! formats so that a scenario file says `model = "ssd_dfl rrandiops=9000"` or `qos = "rpct=90 rlat=5000"`.

use ioshare_core::{ModelConfig, ModelParams, QosConfig, QosParams};
use serde::Deserialize;

/// A cost model's parameters, read from an `io.cost.model` line or preset name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct ModelLine(pub ModelParams);

impl TryFrom<String> for ModelLine {
    type Error = ioshare_core::Error;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Ok(ModelLine(s.parse::<ModelConfig>()?.params))
    }
}

impl From<ModelParams> for ModelLine {
    fn from(p: ModelParams) -> Self {
        ModelLine(p)
    }
}

impl From<ModelLine> for ModelParams {
    fn from(m: ModelLine) -> Self {
        m.0
    }
}

/// Latency QoS parameters, read from an `io.cost.qos` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct QosLine(pub QosParams);

impl TryFrom<String> for QosLine {
    type Error = ioshare_core::Error;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Ok(QosLine(s.parse::<QosConfig>()?.params))
    }
}

/// A group weight, checked against the kernel's range when read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "u32")]
pub struct Weight(pub u32);

impl TryFrom<u32> for Weight {
    type Error = String;
    fn try_from(w: u32) -> Result<Self, String> {
        if (ioshare_core::WEIGHT_MIN..=ioshare_core::WEIGHT_MAX).contains(&w) {
            Ok(Weight(w))
        } else {
            Err(format!("weight {w} is out of range: weights must be between 1 and 10000"))
        }
    }
}
