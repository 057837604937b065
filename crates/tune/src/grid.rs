//! The vrate grid a sweep pins, as resctl-bench's `iocost-qos` does: evenly spaced points from a
//! lowest to a highest vrate, optionally shifted by a random dither of up to half a step (stored in
//! the result, so that several coarse sweeps merge into a finer one).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Lowest vrate a point may have, percent (the kernel clamps vrate at 1%).
pub const MIN_VRATE_PCT: f64 = 1.0;
/// Highest vrate a point may have, percent.
pub const MAX_VRATE_PCT: f64 = 1000.0;
/// Most points a grid may have.
pub const MAX_POINTS: usize = 200;

/// Evenly spaced vrates, percent.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Grid {
    /// Lowest vrate before the dither.
    pub min_pct: f64,
    /// Highest vrate (no point lies above it).
    pub max_pct: f64,
    /// Distance between points.
    pub step_pct: f64,
    /// Shift of every point, 0 ≤ dither < step / 2.
    pub dither_pct: f64,
}

impl Grid {
    /// Parses `MIN:MAX:STEP` (percent, e.g. `10:200:10`), checking that it can be swept.
    pub fn parse(text: &str) -> Result<Grid> {
        let bad = |why: &str| Err(Error::InvalidOptions(format!("--vrate '{text}': {why}")));
        let parts: Vec<&str> = text.split(':').collect();
        let [min, max, step] = parts[..] else {
            return bad("expected MIN:MAX:STEP in percent, e.g. 10:200:10");
        };
        let num = |s: &str| s.trim().trim_end_matches('%').parse::<f64>().ok().filter(|v| v.is_finite());
        let (Some(min), Some(max), Some(step)) = (num(min), num(max), num(step)) else {
            return bad("MIN, MAX and STEP must be numbers (percent), e.g. 10:200:10");
        };
        let grid = Grid { min_pct: min, max_pct: max, step_pct: step, dither_pct: 0.0 };
        grid.validate().map_err(|why| Error::InvalidOptions(format!("--vrate '{text}': {why}")))?;
        Ok(grid)
    }

    /// Why the grid cannot be swept, if it cannot.
    pub fn validate(&self) -> std::result::Result<(), String> {
        if self.min_pct < MIN_VRATE_PCT {
            return Err(format!("vrate {}% cannot be pinned: the lowest is {MIN_VRATE_PCT}%", self.min_pct));
        }
        if self.max_pct > MAX_VRATE_PCT {
            return Err(format!("vrate {}% is above the highest tune pins, {MAX_VRATE_PCT}%", self.max_pct));
        }
        if self.min_pct > self.max_pct {
            return Err(format!(
                "the lowest vrate {}% is above the highest {}%: swap them",
                self.min_pct, self.max_pct
            ));
        }
        if self.step_pct <= 0.0 {
            return Err("the step must be above 0".into());
        }
        if !(0.0..self.step_pct / 2.0 + 1e-9).contains(&self.dither_pct) {
            return Err(format!("the dither {}% must be below half the step", self.dither_pct));
        }
        let n = self.points().len();
        if n > MAX_POINTS {
            return Err(format!("{n} points is more than {MAX_POINTS}: use a larger step"));
        }
        Ok(())
    }

    /// The same grid shifted by a random dither in [0, step / 2).
    pub fn dithered(self, rng: &mut impl rand::Rng) -> Grid {
        Grid { dither_pct: rng.gen_range(0.0..self.step_pct / 2.0), ..self }
    }

    /// The same grid shifted by a dither from the thread's random generator.
    pub fn dither(self) -> Grid {
        self.dithered(&mut rand::thread_rng())
    }

    /// The vrates, lowest first, each rounded to 0.01%.
    pub fn points(&self) -> Vec<f64> {
        let mut out = Vec::new();
        let mut k = 0u32;
        loop {
            let v = ((self.min_pct + self.dither_pct + k as f64 * self.step_pct) * 100.0).round() / 100.0;
            if v > self.max_pct + 1e-9 || out.len() > MAX_POINTS {
                break;
            }
            out.push(v);
            k += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn a_grid_lists_its_points_and_a_dither_shifts_them_inside_the_range() {
        let g = Grid::parse("20:100:20").unwrap();
        assert_eq!(g.points(), [20.0, 40.0, 60.0, 80.0, 100.0]);
        let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
        let d = g.dithered(&mut rng);
        assert!(d.dither_pct > 0.0 && d.dither_pct < 10.0, "{d:?}");
        let p = d.points();
        assert_eq!(p.len(), 4, "the last shifted point would pass 100%: {p:?}");
        assert!(p.iter().all(|&v| v > 20.0 && v < 100.0), "{p:?}");
    }

    #[test]
    fn grids_that_cannot_be_swept_are_refused_with_the_reason() {
        for (text, needle) in [
            ("0:100:10", "cannot be pinned"),
            ("100:50:10", "above the highest"),
            ("10:100:0", "step must be above 0"),
            ("10:100", "MIN:MAX:STEP"),
            ("a:100:10", "numbers"),
            ("1:1000:1", "more than"),
            ("10:2000:10", "above the highest tune pins"),
        ] {
            let msg = Grid::parse(text).unwrap_err().to_string();
            assert!(msg.contains(needle) && msg.contains(text), "{text}: {msg}");
        }
    }
}
