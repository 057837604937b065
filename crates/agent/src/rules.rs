//! Which rule applies to which cgroup: the first rule whose pattern matches it wins, and a match nested
//! below another match is skipped (its IO is already counted in its ancestor's recursive counters).

use std::collections::BTreeMap;
use std::path::Path;

use ioshare_host::find_cgroups;

use crate::config::GroupConfig;

/// Every cgroup below `root` the rules `groups` match now, with the index of the first rule matching
/// it; nested matches dropped.
pub fn matched(root: &Path, groups: &[GroupConfig]) -> BTreeMap<String, usize> {
    let mut found: BTreeMap<String, usize> = BTreeMap::new();
    for (i, g) in groups.iter().enumerate() {
        for rel in find_cgroups(root, &g.cgroup) {
            found.entry(rel).or_insert(i);
        }
    }
    let nested: Vec<String> = found
        .keys()
        .filter(|rel| {
            let p = Path::new(rel.as_str());
            p.ancestors().skip(1).any(|a| found.contains_key(a.to_string_lossy().as_ref()))
        })
        .cloned()
        .collect();
    for rel in nested {
        found.remove(&rel);
    }
    found
}
