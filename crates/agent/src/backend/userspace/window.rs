//! The device's last second: windows of the last [`FOLLOW_WINDOW`] periods, and their median.

use std::collections::VecDeque;

/// Periods over whose median of what the device did vrate follows down: a stall shorter than half
/// of them does not take vrate down, and the limits add up to what the device does.
pub(crate) const FOLLOW_WINDOW: usize = 10;

/// Appends `value` to a window of the last [`FOLLOW_WINDOW`] periods, dropping the oldest.
pub(crate) fn remember<T>(window: &mut VecDeque<T>, value: T) {
    if window.len() == FOLLOW_WINDOW {
        window.pop_front();
    }
    window.push_back(value);
}

/// The median of `values` (the upper one of an even count; not empty).
pub(crate) fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut sorted: Vec<f64> = values.collect();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}
