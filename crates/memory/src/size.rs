//! Byte sizes as people write them in a config: `2G`, `512M`, `4096`.

use crate::error::{Error, Result};

/// Parses `text` as bytes: a number with an optional K, M, G or T suffix (powers of 1024; a trailing
/// `B` or `iB` is accepted).
pub fn parse_size(text: &str) -> Result<u64> {
    let t = text.trim();
    let t = t.strip_suffix("iB").or_else(|| t.strip_suffix('B')).unwrap_or(t);
    let (digits, shift) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(Error::Size(text.to_string())),
            };
            (&t[..i], shift)
        }
        _ => (t, 0),
    };
    let n: u64 = digits.trim().parse().map_err(|_| Error::Size(text.to_string()))?;
    n.checked_mul(1 << shift).ok_or_else(|| Error::Size(text.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
        assert_eq!(parse_size("512M").unwrap(), 512 << 20);
        assert_eq!(parse_size("64KiB").unwrap(), 64 << 10);
        assert_eq!(parse_size("1t").unwrap(), 1 << 40);
        for bad in ["", "G", "2X", "-1G", "99999999999T"] {
            assert!(parse_size(bad).unwrap_err().to_string().contains("not a size"), "{bad}");
        }
    }
}
