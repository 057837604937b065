//! Built-in scenarios, one family per file, found by name.
//!
//! A family module exposes `pub(crate) const BUILTINS: &[Builtin]`; registering a family is one line
//! in the `registry!` invocation below (the macro declares the module and lists its scenarios).
//! A built-in runs one or more simulations and may compare the results with the source's figures.
//! What a built-in is ([`Builtin`], [`Args`], [`Outcome`]) lives in `builtin`, which the families
//! import; this module only registers them, so no family imports from its parent.

mod builtin;

pub use builtin::{Args, Builtin, Outcome};

use crate::error::SimError;

macro_rules! registry {
    ($($family:ident,)*) => {
        $(mod $family;)*

        /// Every built-in scenario, family by family.
        pub fn all() -> Vec<&'static Builtin> {
            let mut all = Vec::new();
            $(all.extend($family::BUILTINS.iter());)*
            all
        }
    };
}

registry! {
    basic,
    paper,
    fixed,
    limits,
    qdepth,
    throttle,
}

/// The built-in scenario called `name`.
pub fn find(name: &str) -> Result<&'static Builtin, SimError> {
    all().into_iter().find(|b| b.name == name).ok_or_else(|| SimError::UnknownScenario(name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found() {
        let all = all();
        for (i, b) in all.iter().enumerate() {
            assert!(all[..i].iter().all(|o| o.name != b.name), "duplicate {}", b.name);
            assert_eq!(find(b.name).unwrap().name, b.name);
        }
        assert!(matches!(find("nope"), Err(SimError::UnknownScenario(_))));
    }
}
