//! A file replaced whole: written under a temporary name beside it, then renamed over it, so that a
//! reader (or a crash) sees the old contents or the new, never a part.

use std::path::Path;

/// Replaces `path`'s contents with `contents`: written to `path` with a `.tmp` extension first (in
/// the same directory, which must exist), then renamed over `path`.
pub fn replace_file(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, contents)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        assert!(replace_file(&dir.path().join("missing/state.json"), b"one").is_err(), "no directory is made");
        replace_file(&path, b"one").unwrap();
        replace_file(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let left: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, ["state.json"], "no temporary left beside it");
    }
}
